#!/usr/bin/env bash
# How planning and setup scale with the number of layers. Writes deep, narrow configs
# (scale_bench --write-config: n linear layers of 16, replication 2, every variable of
# 64 elements or more sharded) of 2,500, 5,000 and 10,000 layers, phased and standard,
# and times with hyperfine (wall, user, system; mean ± σ over --runs runs):
#   popplan plan CONFIG                   the text plan, to /dev/null
#   popplan plan CONFIG --format json     the plan file
#   popreport memory PLAN.json            reading that plan file back
#   poprun train CONFIG --steps 1         a whole run: setup, one step, the checkpoint,
#                                         the test set, the run file (--no-train skips it)
# then what poprun does before its first step, in process and by stage
# (scale_bench --benchmark_filter=BM_Setup, at 2,500, 5,000 and 10,000 layers only).
# Linear work shows as a constant time per layer across the sizes.
#
#   bench/scale.sh [--build DIR] [--runs N] [--layers "2500 5000 10000"] [--no-train]
#
# Needs the native build (cmake --preset native: the tools and build/native/bench/
# scale_bench) and hyperfine (Debian's package).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/native"
runs=3
layers="2500 5000 10000"
train=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --no-train) train=0; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done

popplan="$build/cli/popplan"
poprun="$build/cli/poprun"
popreport="$build/cli/popreport"
bench="$build/bench/scale_bench"
bench_need "cmake --preset native" "$popplan" "$poprun" "$popreport" "$bench"
command -v hyperfine >/dev/null || bench_fail "needs hyperfine (apt-get install hyperfine)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "# $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $layers; do
  for mode in phased standard; do
    "$bench" --write-config "$n" "$mode" > "$work/deep-$n-$mode.yaml"
  done
done

time_it() {  # time_it NAME COMMAND...: one markdown row of hyperfine's figures
  local name="$1"; shift
  if ! hyperfine -N --style none --warmup 1 --runs "$runs" --export-json "$work/t.json" "$*" \
      > /dev/null 2> "$work/hyperfine.err"; then
    cat "$work/hyperfine.err" >&2
    exit 1
  fi
  python3 - "$name" "$work/t.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))["results"][0]
print(f"| {sys.argv[1]} | {r['mean']:.2f} ± {r['stddev'] or 0:.2f} | {r['user']:.2f} | "
      f"{r['system']:.2f} | {r['min']:.2f} | {r['max']:.2f} |")
PY
}

echo
echo "| command | wall [s], mean ± σ | user [s] | system [s] | min [s] | max [s] |"
echo "|---|---|---|---|---|---|"
for n in $layers; do
  for mode in phased standard; do
    config="$work/deep-$n-$mode.yaml"
    time_it "popplan plan, $n layers, $mode" "$popplan" plan "$config"
    time_it "popplan plan --format json, $n layers, $mode" \
      "$popplan" plan "$config" --format json -o "$work/plan.json"
    time_it "popreport memory PLAN.json, $n layers, $mode" "$popreport" memory "$work/plan.json"
    if [[ $train == 1 ]]; then
      time_it "poprun train --steps 1, $n layers, $mode" \
        "$poprun" train "$config" --steps 1 -q -o "$work/run/run.json" --force
    fi
  done
done

echo
filter="BM_Setup/layers:($(echo "$layers" | tr ' ' '|'))/"
"$bench" --benchmark_filter="$filter" --benchmark_repetitions="$runs" \
  --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true
