#!/usr/bin/env bash
# The host memory poprun needs, estimated (popplan plan --format json: host_memory.total,
# what poprun checks before it allocates) against measured (the peak resident set of
# `poprun train --steps 2`, /usr/bin/time -v), for examples/quick.yaml at replication
# factors 1 to 4096 (each replica 16 samples a step, two steps of synthetic data) and for
# every example at its own factor. Prints a markdown table; the estimate should be within
# 25% of the peak everywhere, so that poprun's refusal protects the machine without
# refusing runs it could hold.
#
#   bench/host_memory.sh [--build DIR] [--replicas "1 2 4 ... 4096"] [--no-examples]
#
# Needs a release build (default build/ci) and GNU time (/usr/bin/time). The examples read
# MNIST (scripts/fetch_data.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$root/build/ci"
replicas="1 2 4 8 16 32 64 128 256 512 1024 2048 4096"
examples=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --no-examples) examples=0; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "host_memory.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
popplan="$build/cli/popplan"
poprun="$build/cli/poprun"
for tool in "$popplan" "$poprun" /usr/bin/time; do
  [[ -x "$tool" ]] || { echo "host_memory.sh: $tool not found" >&2; exit 2; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

row() {  # row NAME CONFIG --set ...: one table row
  local name="$1" config="$2"
  shift 2
  local estimate peak
  estimate=$("$popplan" plan "$config" "$@" --format json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["host_memory"]["total"])')
  rm -rf "$work/run"
  if ! /usr/bin/time -v -o "$work/time" "$poprun" train "$config" "$@" --steps 2 \
    --run-dir "$work/run" -q >/dev/null 2>"$work/train.err"; then
    echo "host_memory.sh: $name: poprun train failed: $(cat "$work/train.err")" >&2
    exit 1
  fi
  peak=$(awk '/Maximum resident set size/ { print $6 * 1024 }' "$work/time")
  awk -v n="$name" -v e="$estimate" -v p="$peak" \
    'BEGIN { printf "| %s | %.1f | %.1f | %+.0f%% |\n", n, e / 1048576, p / 1048576, 100 * (e / p - 1) }'
}

echo "# $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
echo "| run | estimate (MiB) | peak RSS (MiB) | estimate vs peak |"
echo "|---|---:|---:|---:|"
for r in $replicas; do
  row "quick R $r" "$root/examples/quick.yaml" --set replication.factor="$r" \
    --set training.micro_batch_size=8 --set training.gradient_accumulation=2 \
    --set data.synthetic_train=$((r * 32)) --set data.synthetic_test=$((r * 8))
done
if [[ $examples == 1 ]]; then
  for example in "$root"/examples/*.yaml; do
    row "$(basename "$example" .yaml)" "$example"
  done
fi
