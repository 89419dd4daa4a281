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
