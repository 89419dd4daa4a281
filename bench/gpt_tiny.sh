#!/usr/bin/env bash
# examples/gpt_tiny.yaml trained as a user trains it (its 3,000 steps, the validation
# loss after each epoch), the wall time of the whole command, then text sampled from
# the last checkpoint: greedy, and at a temperature of 0.8. docs/gpt.md shows the output.
#
#   bench/gpt_tiny.sh [--build DIR] [--steps N]
#
# Needs a release build (default build/ci) and the fortunes text (scripts/fetch_data.sh).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/ci"
steps=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --steps) steps=(--steps "$2"); shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
poprun="$build/cli/poprun"
bench_need "cmake --preset ci" "$poprun"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "poprun train examples/gpt_tiny.yaml ${steps[*]} ($(nproc) cores)"
start=$(date +%s.%N)
"$poprun" train "$root/examples/gpt_tiny.yaml" "${steps[@]}" --run-dir "$work/run" \
  >"$work/out" 2>"$work/err"
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
grep -F "test accuracy" "$work/err" || true
grep -E "^(trained|  final loss|  test accuracy|  throughput)" "$work/out"
echo "wall time of the command: $wall s"
prompt="The meaning of life is"
for t in 0 0.8; do
  echo "poprun generate --prompt \"$prompt\" --tokens 120 --temperature $t --seed 1"
  "$poprun" generate "$work/run" --prompt "$prompt" --tokens 120 --temperature "$t" --seed 1
done
