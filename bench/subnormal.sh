#!/usr/bin/env bash
# Step time once the loss has collapsed. examples/mnist.yaml on synthetic data at its
# default noise fits the data within about ten steps: the loss reaches 0 and the
# softmax's gradients are subnormal. x86 computes on subnormals through a microcode
# assist many times slower than a normal operation, so without flush-to-zero such steps
# slow down several-fold; the engine's threads flush (engine/runtime/float_mode.h).
#
#   bench/subnormal.sh [--build DIR] [--steps N] [--rounds N]
#
# Each round runs, alternated: (1) synthetic data, whose loss collapses; (2) real MNIST,
# same shapes, whose loss stays above zero; (3) synthetic data again with
# POPKIT_FLUSH_DENORMALS=0, the engine without the flush, to show what it saves. Prints
# each run's median step time (steps after warm-up, and for a collapsed run from 10 steps
# after the collapse), within run (1) the steps before the collapse against the steps
# after it, and per round the ratios collapsed / not collapsed. Target: (1) / (2) <= 1.10.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/release"
steps=400
rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
poprun="$build/cli/poprun"
bench_need "" "$poprun"
bash "$root/scripts/fetch_data.sh" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$poprun" --version | sed 's/^/# /'
run() {  # NAME ENV... -- SETS...
  local name=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$poprun" train "$root/examples/mnist.yaml" -q --steps "$steps" \
    --out "$work/$name.json" --force "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
}
for ((r = 1; r <= rounds; r++)); do
  run "flushed$r" POPKIT_FLUSH_DENORMALS=1 -- --set data.dataset=synthetic
  run "mnist$r" POPKIT_FLUSH_DENORMALS=1 -- --set data.dataset=mnist
  run "unflushed$r" POPKIT_FLUSH_DENORMALS=0 -- --set data.dataset=synthetic
done
/usr/bin/python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])

def load(name):
    r = json.load(open(f"{work}/{name}.json"))
    return r["loss"], r["step_seconds"], r["throughput"]["warmup_steps"]

def collapsed(name):
    loss, sec, warm = load(name)
    at = next((k for k, x in enumerate(loss) if x < 1e-30), None)
    if at is None or at + 20 > len(loss):
        sys.exit(f"{name}: the loss did not collapse (first below 1e-30 at {at}, last {loss[-1]})")
    return at, statistics.median(sec[warm:at]) if at > warm + 2 else None, statistics.median(sec[at + 10:])

ratios, unflushed_ratios = [], []
print(f"{'round':>5s} {'collapse':>9s} {'before':>9s} {'after':>9s} {'mnist':>9s} {'no flush':>9s}"
      f"  {'after/mnist':>11s} {'no flush/mnist':>14s}   (median ms per step)")
for r in range(1, rounds + 1):
    at, before, after = collapsed(f"flushed{r}")
    loss, sec, warm = load(f"mnist{r}")
    if loss[-1] <= 1e-3:
        sys.exit(f"mnist{r}: loss {loss[-1]}: real MNIST collapsed too")
    mnist = statistics.median(sec[warm:])
    _, _, unflushed = collapsed(f"unflushed{r}")
    ratios.append(after / mnist)
    unflushed_ratios.append(unflushed / mnist)
    b = f"{1e3 * before:9.2f}" if before else f"{'-':>9s}"
    print(f"{r:5d} {at:9d} {b} {1e3 * after:9.2f} {1e3 * mnist:9.2f} {1e3 * unflushed:9.2f}"
          f"  {after / mnist:11.3f} {unflushed / mnist:14.3f}")
mm = lambda xs: f"min {min(xs):.3f} median {statistics.median(xs):.3f} max {max(xs):.3f}"
print(f"collapsed / not collapsed, flushed (the engine): {mm(ratios)} "
      f"(target <= 1.10: {'met' if statistics.median(ratios) <= 1.10 else 'NOT met'})")
print(f"collapsed / not collapsed, POPKIT_FLUSH_DENORMALS=0: {mm(unflushed_ratios)}")
PY
