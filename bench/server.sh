#!/usr/bin/env bash
# Replica scaling and popkit against PyTorch at the same global batch, on a many-core
# server: everything one measurement session needs, in one script that writes as it goes.
#
#   bench/server.sh [--out DIR] [--steps N] [--rounds N] [--python PY] [--quick]
#                   [--sections "scale sweep batch pair tune"]
#
# Sections (real MNIST, examples/mnist.yaml's model, Adam; the tools from PATH):
#   scale  R 16 (one thread per replica) against R 1 on one thread (--threads 1): the
#          tutorial's micro-batch 8 x accumulation 4, standard and phased, and micro-batch
#          128 standard ("standard" = execution.mode=standard, weights and optimizer
#          state on the device)
#   sweep  R 1, 2, 4, 8, 16 at micro-batch 128, standard, with where each step's time
#          goes (run.json's phases, seconds by kind, and what no op accounts for)
#   batch  global batch 512 and 2,048: popkit's splits R x micro-batch against PyTorch
#          plain (one process, one batch per Adam step) on every core, alternated over
#          --rounds rounds; PyTorch at its better OpenMP wait policy (active, passive) in
#          each round; its sgemm rate (1024^3 on every thread) as the bound
#   pair   the same on two cores (taskset -c 0,1; PyTorch on 2 threads)
#   tune   poprun calibrate on this machine, then popplan tune --global-batch 512 and
#          2,048 with that profile, and a run of what tune picks
# popkit's figure is the run file's throughput.median (steps after warm-up); PyTorch's
# is bench/torch_reference.py's median of repeats after warm-up. Rows go to stdout as
# they finish, and every result as one JSON line to DIR/results.jsonl.
# On the 16-core device machine: source .device-bundle/env.sh first (../shared/device-bundle.sh).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="${OUT:-/tmp/popkit-server}"
steps=200
rounds=2
py=python3
sections="scale sweep batch pair tune"
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --python) py="$2"; shift 2 ;;
    --sections) sections="$2"; shift 2 ;;
    --quick) quick=1; steps=30; rounds=1; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
config="$here/../examples/mnist.yaml"
[[ -f "$config" ]] || bench_fail "no $config"
for tool in poprun popplan; do
  command -v "$tool" >/dev/null || bench_fail "$tool is not on PATH"
done
cores=$(nproc)
mkdir -p "$out"
results="$out/results.jsonl"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
standard=(--set execution.mode=standard --set remote.weights=false --set remote.optimizer_state=false)

echo "# $(date -u +%FT%TZ), $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg); steps $steps, rounds $rounds; $("$py" -c 'import torch; print("PyTorch", torch.__version__)' 2>/dev/null || echo 'no PyTorch')"

# popkit LABEL R MICRO ACC [--threads N] [--taskset CPUS] [EXTRA ARGS...]: one poprun run;
# prints a row and appends its JSON line.
popkit() {
  local label="$1" r="$2" mb="$3" acc="$4"; shift 4
  local pre=() args=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --taskset) pre=(taskset -c "$2"); shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  local dir="$work/run-$RANDOM$RANDOM"
  if ! "${pre[@]}" poprun train "$config" -q --steps "$steps" --run-dir "$dir" \
      --set replication.factor="$r" --set training.micro_batch_size="$mb" \
      --set training.gradient_accumulation="$acc" --set training.epochs=1000 \
      "${args[@]}" > "$work/log" 2>&1; then
    echo "server.sh: $label failed:" >&2; tail -5 "$work/log" >&2; return 0
  fi
  "$py" "$here/server_rows.py" popkit "$results" "$label" "$r" "$mb" "$acc" "${args[*]} ${pre[*]}" "$dir/run.json"
}

# torch LABEL BATCH THREADS [--taskset CPUS]: PyTorch plain at its better wait policy.
torch_plain() {
  local label="$1" batch="$2" threads="$3" pre=()
  [[ "${4:-}" == --taskset ]] && pre=(taskset -c "$5")
  local tsteps=$(( batch >= 2048 ? 15 : 40 )); [[ $quick == 1 ]] && tsteps=5
  local policy
  for policy in active passive; do
    OMP_WAIT_POLICY=$policy "${pre[@]}" "$py" "$here/torch_reference.py" --mode plain \
      --micro-batch "$batch" --replicas 1 --accumulation 1 --threads "$threads" \
      --steps "$tsteps" --repeats 5 --warmup 5 > "$work/t-$policy.json" 2> "$work/tlog" \
      || { echo "server.sh: PyTorch $label ($policy) failed:" >&2; tail -3 "$work/tlog" >&2; continue; }
  done
  "$py" "$here/server_rows.py" torch "$results" "$label" "$work/t-active.json" "$work/t-passive.json"
  rm -f "$work"/t-*.json
}

sgemm() {  # PyTorch's sgemm rate on THREADS threads, 1024^3, GFLOP/s
  "$py" - "$1" <<'EOF' | tee -a "$out/sgemm.txt"
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
for _ in range(5): a @ b
best = 0.0
for _ in range(5):
    t = time.perf_counter(); n = 20
    for _ in range(n): a @ b
    best = max(best, 2 * 1024**3 * n / (time.perf_counter() - t) / 1e9)
print(f"# PyTorch sgemm 1024^3 on {sys.argv[1]} threads: {best:,.0f} GFLOP/s (best of 5 x 20)")
EOF
}

header() { echo; echo "## $1"; echo; echo "| run | samples/s | step | threads |"; echo "|---|---:|---|---:|"; }
has() { [[ " $sections " == *" $1 "* ]]; }
full=$cores

if has scale; then
  header "scale: R $full against R 1 on one thread"
  popkit "mb8x4 standard R1 t1" 1 8 4 --threads 1 "${standard[@]}"
  popkit "mb8x4 standard R$full" "$full" 8 4 "${standard[@]}"
  popkit "mb8x4 phased R1 t1" 1 8 4 --threads 1
  popkit "mb8x4 phased R$full" "$full" 8 4
  popkit "mb128 standard R1 t1" 1 128 1 --threads 1 "${standard[@]}"
  popkit "mb128 standard R$full" "$full" 128 1 "${standard[@]}"
fi
if has sweep; then
  header "sweep: micro-batch 128, standard, by replicas"
  for r in 1 2 4 8 16; do
    (( r <= full )) && popkit "mb128 standard R$r" "$r" 128 1 "${standard[@]}"
  done
  popkit "mb128 standard R1 all threads" 1 128 1 --threads "$full" "${standard[@]}"
fi
if has batch; then
  sgemm "$full" || true
  for round in $(seq "$rounds"); do
    header "batch: global 512 and 2,048 on $full cores, round $round"
    torch_plain "torch 512" 512 "$full"
    for r in 16 8 4 2; do
      (( r <= full )) && popkit "512 = R$r x $((512 / r))" "$r" $((512 / r)) 1 "${standard[@]}"
    done
    popkit "512 = R1 x 512 all threads" 1 512 1 --threads "$full" "${standard[@]}"
    torch_plain "torch 2048" 2048 "$full"
    for r in 16 8; do
      (( r <= full )) && popkit "2048 = R$r x $((2048 / r))" "$r" $((2048 / r)) 1 "${standard[@]}"
    done
    popkit "2048 = R1 x 2048 all threads" 1 2048 1 --threads "$full" "${standard[@]}"
  done
fi
if has pair; then
  sgemm 2 || true
  for round in $(seq "$rounds"); do
    header "pair: global 512 and 2,048 on 2 cores (taskset -c 0,1), round $round"
    torch_plain "torch 512 2c" 512 2 --taskset 0,1
    popkit "512 = R2 x 256 2c" 2 256 1 --taskset 0,1 "${standard[@]}"
    torch_plain "torch 2048 2c" 2048 2 --taskset 0,1
    popkit "2048 = R2 x 1024 2c" 2 1024 1 --taskset 0,1 "${standard[@]}"
  done
fi
if has tune; then
  echo; echo "## tune: poprun calibrate here, then popplan tune"
  poprun calibrate -o "$out/profile.yaml" > "$out/calibrate.txt" 2>&1 \
    || { echo "server.sh: calibrate failed" >&2; tail -5 "$out/calibrate.txt" >&2; }
  for gb in 512 2048; do
    for r in "$full" 8; do
      echo; echo "popplan tune --replicas $r --global-batch $gb (this machine's profile):"
      popplan tune "$config" --memory-per-replica 1GiB --replicas "$r" --global-batch "$gb" \
        --set device.profile="$out/profile.yaml" --write "$work/pick.yaml" --force \
        > "$out/tune-$r-$gb.txt" 2>&1 || true
      head -16 "$out/tune-$r-$gb.txt"
      if [[ -f "$work/pick.yaml" ]] && poprun train "$work/pick.yaml" -q --steps "$steps" \
          --run-dir "$work/pick-$r-$gb" > "$work/log" 2>&1; then
        "$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); print("tune pick trained at %.0f samples/s" % d["throughput"]["median"])' \
          "$work/pick-$r-$gb/run.json"
      fi
      rm -f "$work/pick.yaml"
    done
  done
fi
echo; echo "# done $(date -u +%FT%TZ); every result: $results"
