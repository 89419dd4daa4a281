# What every bench/ script shares, sourced after `set -euo pipefail`: where the repository
# is, its help (the script's opening comment), and the errors that end it with exit 2.
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
root="$(dirname "$here")"
bench_name="$(basename "$0")"

# The script's opening comment block (after the #! line), as its --help.
bench_usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

# Ends the script with exit 2 and a message naming it.
bench_fail() {
  echo "$bench_name: $*" >&2
  exit 2
}

bench_unknown() {
  bench_fail "unknown argument '$1'"
}

# bench_need HINT TOOL...: every TOOL an executable file, else exit 2 naming the first one
# missing and how to build it (HINT).
bench_need() {
  local hint="$1" tool
  shift
  for tool in "$@"; do
    [[ -x "$tool" ]] || bench_fail "$tool not built${hint:+ ($hint)}"
  done
}

# bench_sgemm_rate ENGINE_BENCH PYTHON SCRATCH: the machine's sgemm rate in FLOP/s, all
# cores (each its own single-threaded Eigen GEMM, as replicas run), the median of three
# repetitions of engine_bench's BM_SgemmMachine/1024.
bench_sgemm_rate() {
  "$1" --benchmark_filter='BM_SgemmMachine/1024' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_format=json >"$3/sgemm.json" 2>/dev/null
  "$2" -c '
import json, sys
rows = json.load(open(sys.argv[1]))["benchmarks"]
print(next(r["FLOP/s"] for r in rows if r.get("aggregate_name") == "median"))' "$3/sgemm.json"
}
