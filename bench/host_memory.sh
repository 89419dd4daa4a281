#!/usr/bin/env bash
# The host memory poprun needs, estimated against measured: poprun train's own check
# before set-up (the figure it refuses a run by, read from the refusal it prints when
# POPKIT_HOST_MEMORY is 1 byte; popplan plan's host_memory.total is the same figure
# without the datasets read from files, shown beside it) against the peak resident set
# of `poprun train --steps 2` (/usr/bin/time -v), for examples/quick.yaml at replication
# factors 1 to 4096 (each replica 16 samples a step, two steps of synthetic data) and for
# every example at its own factor. Prints a markdown table; the estimate should be within
# 25% of the peak everywhere, so that poprun's refusal protects the machine without
# refusing runs it could hold.
#
#   bench/host_memory.sh [--build DIR] [--replicas "1 2 4 ... 4096"] [--no-examples] [--mpi N]
#
# --mpi N: the run as N MPI ranks on this host (mpirun -np N, each rank under
# /usr/bin/time -v), quick.yaml only: a rank's estimate and rank 0's (from poprun's refusal)
# against each rank's peak, and the host's (all N ranks) against the sum of the peaks;
# popplan's one-process figure (all R replicas, what each rank was checked by before)
# beside them. Needs a build with MPI and mpirun (--oversubscribe: more ranks than cores).
#
# Needs a release build (default build/ci) and GNU time (/usr/bin/time). The examples read
# MNIST (scripts/fetch_data.sh).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/ci"
replicas="1 2 4 8 16 32 64 128 256 512 1024 2048 4096"
examples=1
ranks=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --no-examples) examples=0; shift ;;
    --mpi) ranks="$2"; examples=0; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
popplan="$build/cli/popplan"
poprun="$build/cli/poprun"
bench_need "cmake --preset ci" "$popplan" "$poprun"
[[ -x /usr/bin/time ]] || bench_fail "needs GNU time (apt-get install time)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# "73.86 MiB" (format_bytes) -> bytes
to_bytes() {
  awk -v n="$1" -v u="$2" 'BEGIN {
    m["B"] = 1; m["KiB"] = 1024; m["MiB"] = 1048576; m["GiB"] = 1073741824; m["TiB"] = 1099511627776
    printf "%.0f", n * m[u] }'
}

row() {  # row NAME CONFIG --set ...: one table row
  local name="$1" config="$2"
  shift 2
  local planned needs peak
  planned=$("$popplan" plan "$config" "$@" --format json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["host_memory"]["total"])')
  needs=$(POPKIT_HOST_MEMORY=1 "$poprun" train "$config" "$@" --steps 2 --run-dir "$work/refused" \
    2>&1 >/dev/null | sed -nE 's/.*the run needs ([0-9.]+) ([KMGT]?i?B) of host memory.*/\1 \2/p' ||
    true)  # refused: exit 2
  [[ -n "$needs" ]] || { echo "host_memory.sh: $name: poprun did not state its estimate" >&2; exit 1; }
  # shellcheck disable=SC2086
  needs=$(to_bytes $needs)
  rm -rf "$work/run"
  if ! /usr/bin/time -v -o "$work/time" "$poprun" train "$config" "$@" --steps 2 \
    --run-dir "$work/run" -q >/dev/null 2>"$work/train.err"; then
    echo "$bench_name: $name: poprun train failed: $(cat "$work/train.err")" >&2
    exit 1
  fi
  peak=$(awk '/Maximum resident set size/ { print $6 * 1024 }' "$work/time")
  awk -v n="$name" -v p="$planned" -v e="$needs" -v m="$peak" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.1f | %+.0f%% |\n", n, p / 1048576, e / 1048576, m / 1048576, 100 * (e / m - 1) }'
}

# mpi_row NAME CONFIG --set ...: one row of a run over $ranks ranks.
mpi_row() {
  local name="$1" config="$2"
  shift 2
  local planned refusal rank writer peaks
  planned=$("$popplan" plan "$config" "$@" --format json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["host_memory"]["total"])')
  refusal=$(POPKIT_HOST_MEMORY=1 "${mpirun[@]}" -np "$ranks" "$poprun" train "$config" "$@" \
    --steps 2 --run-dir "$work/refused" 2>&1 >/dev/null || true)  # refused: exit 2
  # "... need X of host memory: Y a rank (...) and rank 0 Z more for the run file, ..."
  rank=$(sed -nE 's/.*of host memory: ([0-9.]+) ([KMGT]?i?B) a rank.*/\1 \2/p' <<<"$refusal")
  writer=$(sed -nE 's/.* and rank 0 ([0-9.]+) ([KMGT]?i?B) more for the run file.*/\1 \2/p' \
    <<<"$refusal")
  [[ -n "$rank" ]] || { echo "$bench_name: $name: poprun did not state a rank's estimate: $refusal" >&2; exit 1; }
  # shellcheck disable=SC2086
  rank=$(to_bytes $rank)
  # shellcheck disable=SC2086
  writer=$((rank + $([[ -n "$writer" ]] && to_bytes $writer || echo 0)))
  rm -rf "$work/run" "$work"/time.*
  if ! "${mpirun[@]}" -np "$ranks" bash -c '/usr/bin/time -v -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$work/time" "$poprun" train "$config" "$@" --steps 2 --run-dir "$work/run" -q \
    >/dev/null 2>"$work/train.err"; then
    echo "$bench_name: $name: poprun train failed: $(cat "$work/train.err")" >&2
    exit 1
  fi
  peaks=$(for ((k = 0; k < ranks; ++k)); do
    awk '/Maximum resident set size/ { print $6 * 1024 }' "$work/time.$k"
  done | tr '\n' ' ')
  awk -v n="$name" -v p="$planned" -v e="$rank" -v w="$writer" -v peaks="$peaks" 'BEGIN {
    k = split(peaks, m, " "); other = 0; sum = 0
    for (i = 1; i <= k; ++i) { sum += m[i]; if (i > 1 && m[i] > other) other = m[i] }
    host = w + (k - 1) * e; M = 1048576
    printf "| %s | %.1f | %.1f | %.1f | %+.0f%% | %.1f | %.1f | %+.0f%% | %.1f | %.1f | %+.0f%% |\n",
      n, p / M, w / M, m[1] / M, 100 * (w / m[1] - 1), e / M, other / M, 100 * (e / other - 1),
      host / M, sum / M, 100 * (host / sum - 1) }'
}

echo "# $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
if [[ $ranks -gt 0 ]]; then
  command -v mpirun >/dev/null || bench_fail "--mpi needs mpirun (apt-get install openmpi-bin)"
  # As root OpenMPI refuses to start without these; on fewer cores than ranks it needs
  # --oversubscribe.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpirun=(mpirun --oversubscribe)
  echo "$ranks ranks on this host:"
  echo
  echo "| run | popplan, one process (MiB) | rank 0's estimate (MiB) | rank 0's peak RSS (MiB) | vs peak | other rank's estimate (MiB) | largest other peak (MiB) | vs peak | host's estimate (MiB) | sum of peaks (MiB) | vs sum |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for r in $replicas; do
    [[ $((r % ranks)) == 0 ]] || continue
    mpi_row "quick R $r" "$root/examples/quick.yaml" --set replication.factor="$r" \
      --set training.micro_batch_size=8 --set training.gradient_accumulation=2 \
      --set data.synthetic_train=$((r * 32)) --set data.synthetic_test=$((r * 8))
  done
  exit 0
fi
echo "| run | popplan (MiB) | poprun's check (MiB) | peak RSS (MiB) | check vs peak |"
echo "|---|---:|---:|---:|---:|"
for r in $replicas; do
  row "quick R $r" "$root/examples/quick.yaml" --set replication.factor="$r" \
    --set training.micro_batch_size=8 --set training.gradient_accumulation=2 \
    --set data.synthetic_train=$((r * 32)) --set data.synthetic_test=$((r * 8))
done
if [[ $examples == 1 ]]; then
  for example in "$root"/examples/*.yaml; do
    [[ $(basename "$example") == gpt2_* ]] && continue  # TiBs: planned for IPUs
    row "$(basename "$example" .yaml)" "$example"
  done
fi
