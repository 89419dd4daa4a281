#!/usr/bin/env bash
# Step time before and after the loss collapses. examples/mnist.yaml on synthetic data
# at its default noise fits the data within tens of steps: the loss reaches 0 and the
# softmax's gradients are subnormal. Without flush-to-zero, x86 takes a microcode assist
# on each subnormal and steps slow down several-fold; the engine's threads flush
# (engine/runtime/float_mode.h), so the step time after the collapse should stay within
# 10% of the time before it.
#
#   bench/subnormal.sh [--build DIR] [--steps N] [--runs N]
#
# Prints, per run, the step where the loss first fell below 1e-30, the median step time
# over the steps before it (after 5 warm-up steps) and over the steps after it (from 10
# steps past it), and their ratio; then min / median / max of the ratio.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$root/build/release"
steps=400
runs=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "subnormal.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
poprun="$build/cli/poprun"
[[ -x "$poprun" ]] || { echo "subnormal.sh: $poprun not built" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$poprun" --version | sed 's/^/# /'
for ((i = 1; i <= runs; i++)); do
  "$poprun" train "$root/examples/mnist.yaml" -q --steps "$steps" --out "$work/run$i.json" \
    --set data.dataset=synthetic --set training.seed=$((42 + i)) >"$work/run$i.log" 2>&1 ||
    { cat "$work/run$i.log" >&2; exit 1; }
done
/usr/bin/python3 - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
ratios = []
print(f"{'run':>4s} {'collapse at':>12s} {'before ms':>10s} {'after ms':>10s} {'after/before':>13s}")
for i in range(1, runs + 1):
    r = json.load(open(f"{work}/run{i}.json"))
    loss, sec = r["loss"], r["step_seconds"]
    at = next((k for k, x in enumerate(loss) if x < 1e-30), None)
    if at is None or at < 10 or at + 20 > len(loss):
        sys.exit(f"run {i}: the loss did not collapse early enough to compare (first below 1e-30 at {at}, "
                 f"last loss {loss[-1]}); try more --steps")
    before = statistics.median(sec[5:at])
    after = statistics.median(sec[at + 10:])
    ratios.append(after / before)
    print(f"{i:4d} {at:12d} {1e3 * before:10.2f} {1e3 * after:10.2f} {after / before:13.3f}")
print(f"after/before: min {min(ratios):.3f} median {statistics.median(ratios):.3f} max {max(ratios):.3f} "
      f"(target <= 1.10: {'met' if statistics.median(ratios) <= 1.10 else 'NOT met'})")
PY
