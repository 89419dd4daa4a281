#!/usr/bin/env bash
# Training tokens/s of examples/gpt_tiny.yaml (2 blocks, width 128, 4 heads, sequence
# 128, micro-batch 16, tied head, Adam) against PyTorch with the same model and shapes
# (bench/torch_gpt.py), side by side: each round runs popkit, then PyTorch on one thread,
# on every core, and on every core with one OpenBLAS thread (its best figure is
# PyTorch's), so load from other processes hits both alike. Prints each round's rates,
# then popkit / PyTorch as min / median / max over the rounds, and the GEMM-bound
# fraction: the model's training FLOPs a token times popkit's tokens/s over the
# machine's sgemm rate (the engine's GEMM on every core) measured in the same round.
#
#   bench/gpt_throughput.sh [--build DIR] [--bench FILE] [--rounds N] [--steps N]
#
#   --build   the build to measure (default build/release: the README's set-up)
#   --bench   engine_bench, for the sgemm rate (default DIR/bench/engine_bench; the
#             GEMM-bound row is skipped without one)
#   --steps   popkit's steps a round (default 80; its figure is the run file's median
#             over the steps after warm-up), PyTorch's 5 repeats of 10 steps after 3
#
# PyTorch is /usr/bin/python3's (Debian's python3-torch on OpenBLAS, with
# OMP_WAIT_POLICY=passive), or $PYTHON's.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/release"
bench=""
rounds=3
steps=80
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --bench) bench="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
poprun="$build/cli/poprun"
bench_need "cmake --preset release && cmake --build --preset release" "$poprun"
[[ -n "$bench" ]] || bench="$build/bench/engine_bench"
[[ -x "$bench" ]] || bench=""
python="${PYTHON:-/usr/bin/python3}"
"$python" -c 'import torch' 2>/dev/null || bench_fail "$python has no torch (apt-get install python3-torch libopenblas0-pthread)"
cores=$(nproc)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.txt"


for round in $(seq "$rounds"); do
  "$poprun" train "$root/examples/gpt_tiny.yaml" --steps "$steps" --set eval.every=0 \
    --run-dir "$work/popkit-$round" -q >/dev/null 2>"$work/popkit-$round.err" ||
    { cat "$work/popkit-$round.err" >&2; bench_fail "poprun train failed (round $round)"; }
  "$python" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("popkit -", sys.argv[2], r["throughput"]["median"] * 128)' \
    "$work/popkit-$round/run.json" "$round" >>"$results"
  # PyTorch's settings: torch threads / OpenBLAS threads (its GEMMs thread in OpenBLAS,
  # the rest in torch's own pool; both at every core may oversubscribe).
  for setting in 1/1 "$cores/$cores" "$cores/1"; do
    OPENBLAS_NUM_THREADS=${setting#*/} "$python" "$here/torch_gpt.py" --threads "${setting%/*}" \
      --batch 16 --seq 128 >"$work/torch.json"
    "$python" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("torch", sys.argv[2], sys.argv[3], r["tokens_per_second"]["median"])' \
      "$work/torch.json" "$setting" "$round" >>"$results"
  done
  [[ -n "$bench" ]] && echo "sgemm - $round $(bench_sgemm_rate "$bench" "$python" "$work")" >>"$results"
done

"$python" - "$results" "$rounds" "$cores" <<'PY'
import statistics, sys
from collections import defaultdict
v = defaultdict(dict)
for line in open(sys.argv[1]):
    tool, threads, rnd, rate = line.split()
    v[(tool, threads)][int(rnd)] = float(rate)
rounds, cores = range(1, int(sys.argv[2]) + 1), sys.argv[3]
def mmm(xs):
    return f"{min(xs):8.3f} {statistics.median(xs):8.3f} {max(xs):8.3f}"
popkit = [v[("popkit", "-")][r] for r in rounds]
settings = ("1/1", f"{cores}/{cores}", f"{cores}/1")
torch = {t: [v[("torch", t)][r] for r in rounds] for t in settings}
best = [max(torch[t][i] for t in settings) for i in range(len(popkit))]
print(f"{'tokens/s a round':34s} " + " ".join(f"{'round ' + str(r):>10s}" for r in rounds))
print(f"{'popkit':34s} " + " ".join(f"{x:10.0f}" for x in popkit))
for t in settings:
    label = f"PyTorch, threads {t.replace('/', ', OpenBLAS ')}"
    print(f"{label:34s} " + " ".join(f"{x:10.0f}" for x in torch[t]))
print()
print(f"{'ratio (per round)':34s} {'min':>8s} {'median':>8s} {'max':>8s}  target")
xs = [p / b for p, b in zip(popkit, best)]
print(f"{'popkit / PyTorch at its best':34s} {mmm(xs)}  >= 1.5 {'met' if statistics.median(xs) >= 1.5 else 'NOT met'}")
if ("sgemm", "-") in v:
    # Training FLOPs a token as nanoGPT counts them (PaLM's 6 N + 12 L T C): 3 x the
    # forward's (the backward is twice it); a block's forward 2 (4 C^2 + 2 C H) for its
    # GEMMs and 4 T C for attention's scores and weighted sum over every key (the dense
    # count, though the causal half is what matters), the head's 2 C V.
    C, H, T, V, L = 128, 512, 128, 256, 2
    flops = 3 * (L * (2 * (4 * C * C + 2 * C * H) + 4 * T * C) + 2 * C * V)
    sgemm = [v[("sgemm", "-")][r] for r in rounds]
    f = [flops * p / s for p, s in zip(popkit, sgemm)]
    print(f"{f'GEMM-bound: {flops / 1e6:.2f} MFLOP/token x tokens/s / sgemm':34s} {mmm(f)}")
PY
