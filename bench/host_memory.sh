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
#   bench/host_memory.sh [--build DIR] [--replicas "1 2 4 ... 4096"] [--no-examples]
#
# Needs a release build (default build/ci) and GNU time (/usr/bin/time). The examples read
# MNIST (scripts/fetch_data.sh).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/ci"
replicas="1 2 4 8 16 32 64 128 256 512 1024 2048 4096"
examples=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --no-examples) examples=0; shift ;;
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
    echo "host_memory.sh: $name: poprun train failed: $(cat "$work/train.err")" >&2
    exit 1
  fi
  peak=$(awk '/Maximum resident set size/ { print $6 * 1024 }' "$work/time")
  awk -v n="$name" -v p="$planned" -v e="$needs" -v m="$peak" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.1f | %+.0f%% |\n", n, p / 1048576, e / 1048576, m / 1048576, 100 * (e / m - 1) }'
}

echo "# $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
echo "| run | popplan (MiB) | poprun's check (MiB) | peak RSS (MiB) | check vs peak |"
echo "|---|---:|---:|---:|---:|"
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
