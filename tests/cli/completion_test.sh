#!/usr/bin/env bash
# The bash completion offers each tool's verbs and every flag that each verb's --help
# lists (so a new flag without a completion fails here).
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
. "$POPKIT_SOURCE_DIR/packaging/popkit.bash-completion"
complete_words() {  # complete_words WORD... : what _popkit offers for the last word
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _popkit
  printf '%s\n' "${COMPREPLY[@]}"
}
[ "$(complete_words popplan pl | tr '\n' ' ')" = "plan " ] || fail "popplan pl<TAB>: $(complete_words popplan pl)"
[ "$(complete_words popreport compare x.json --format c | tr '\n' ' ')" = "csv " ] || fail "--format c<TAB>"
for tool in popplan poprun popreport; do
  for verb in $(_popkit_verbs $tool); do
    offered=" $(complete_words $tool "$verb" - | tr '\n' ' ') "
    for flag in $($tool "$verb" --help | grep -oE -- '(^|[ ,])--?[a-z][a-z-]*' | tr -d ' ,' | sort -u); do
      [[ $offered == *" $flag "* ]] || fail "$tool $verb: completion lacks $flag"
    done
  done
done
finish completion
