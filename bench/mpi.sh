#!/usr/bin/env bash
# Replicas across processes against replicas in one process, side by side on this
# machine: `mpirun -np 2 poprun train` (2 ranks x 1 replica, MPI messages between them)
# and `poprun train` (1 process x 2 replicas, in-process collectives), alternated A B A B
# on real MNIST; prints each round's medians and the ratio ranks / process (min, median,
# max over the rounds), and the bytes per replica per step that crossed between ranks.
#
#   bench/mpi.sh [--build DIR] [--rounds N] [--steps S] [-- --set KEY=VALUE ...]
#
# Default: build/release, 5 rounds of 300 steps of examples/mnist.yaml (R 2, micro-batch
# 8, accumulation 4, phased, RTS). Each side uses both cores: the process runs one
# replica per core, each rank one replica on its own core (the engine gives a rank
# cores / ranks on its host).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/release"
rounds=5
steps=300
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
poprun="$build/cli/poprun"
bench_need "" "$poprun"
command -v mpirun >/dev/null || bench_fail "mpirun not found (scripts/install_deps.sh)"
"$poprun" --version | grep -q "MPI built in" || bench_fail "$poprun has no MPI"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=("$root/examples/mnist.yaml" --set data.dataset=mnist --steps "$steps" -q "${extra[@]}")

median_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["throughput"]["median"])' "$1"; }

echo "round  2 ranks x 1 replica  1 process x 2 replicas  ratio"
ratios=()
for round in $(seq "$rounds"); do
  # a folder a round, so that no run replaces the last one's files (--force would say so)
  mpirun --oversubscribe -np 2 "$poprun" train "${args[@]}" -o "$tmp/$round/ranks/run.json" --checkpoint-dir "$tmp/$round/ranks/c" >/dev/null
  "$poprun" train "${args[@]}" -o "$tmp/$round/process/run.json" --checkpoint-dir "$tmp/$round/process/c" >/dev/null
  a=$(median_of "$tmp/$round/ranks/run.json")
  b=$(median_of "$tmp/$round/process/run.json")
  r=$(/usr/bin/python3 -c "print(f'{$a / $b:.3f}')")
  ratios+=("$r")
  printf '%5d  %19.0f  %22.0f  %5s\n' "$round" "$a" "$b" "$r"
done
/usr/bin/python3 - "${ratios[@]}" <<'PY'
import statistics, sys
r = sorted(float(x) for x in sys.argv[1:])
print(f"ranks / process samples/s: min {r[0]:.3f}  median {statistics.median(r):.3f}  max {r[-1]:.3f}")
PY
/usr/bin/python3 - "$tmp/$rounds/ranks/run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
p = run["processes"]
print(f"bytes per replica per step across ranks: {p['cross_process_bytes']:,} "
      f"(planned collective bytes {run['bytes_moved']['planned']['collective']:,}); {p['mpi']}")
PY
