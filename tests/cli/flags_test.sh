#!/usr/bin/env bash
# One CLI convention for the three tools: unknown flags and verbs get "did you mean" in
# the order typed (exit 2), every verb takes -q/--quiet, -o/--output where a verb writes
# a file (poprun's --out still works), exit codes (130 included) and where the
# documentation is in every --help.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"

out=$(popplan plan "$config" --fromat json 2>&1 >/dev/null)
[ $? = 2 ] || fail "an unknown flag did not exit 2"
[ "$out" = "popplan plan: unknown flag '--fromat'; did you mean '--format'?
popplan plan: unexpected argument 'json'
Run 'popplan plan --help' for more information." ] || fail "unknown flag message: $out"

out=$(popplan plna "$config" 2>&1 >/dev/null)
[ $? = 2 ] || fail "an unknown verb did not exit 2"
[ "$out" = "popplan: unknown verb 'plna'; did you mean 'plan'?
Run 'popplan --help' for more information." ] || fail "unknown verb message: $out"
expect 2 "popreport: unknown verb 'frobnicate' (verbs: memory, throughput, compare)" -- popreport frobnicate x.json
expect 2 "poprun train: unknown flag '--chekpoint-dir'; did you mean '--checkpoint-dir'?" -- poprun train "$config" --chekpoint-dir=x

for tool in popplan poprun popreport; do
  $tool --help | grep -q "130 stopped by SIGINT or SIGTERM" || fail "$tool --help does not document exit code 130"
  $tool --help | grep -q "docs/concepts.md" || fail "$tool --help does not name docs/"
done
for verb in "popplan validate" "popplan plan" "popplan groups" "popplan schema" "poprun train" \
  "poprun eval" "poprun generate" "popreport memory" "popreport throughput" "popreport compare"; do
  # shellcheck disable=SC2086
  $verb --help | grep -q -- "-q,--quiet" || fail "$verb has no -q/--quiet"
done
for verb in "popplan plan" "poprun train" "poprun eval" "poprun generate" "popreport memory" \
  "popreport throughput" "popreport compare"; do
  # shellcheck disable=SC2086
  $verb --help | grep -q -- "-o,--output" || fail "$verb has no -o/--output"
done

# --quiet: nothing on stdout, the outcome in the exit code.
out=$(popplan validate -q "$config")
[ $? = 0 ] && [ -z "$out" ] || fail "validate -q printed '$out'"
out=$(poprun train "$config" --steps 2 -q --out old/run.json 2>&1)
[ $? = 0 ] && [ -z "$out" ] || fail "train -q printed '$out'"
[ -f old/run.json ] || fail "--out (the old spelling) wrote no run file"
out=$(poprun train "$config" --steps 2 --format json -o new/run.json 2>/dev/null)
/usr/bin/python3 -c 'import json,sys; j = json.loads(sys.argv[1]); assert j["steps"] == 2 and j["run_file"] == "new/run.json", j' "$out" \
  || fail "train --format json: $out"
popreport memory new/run.json -o report.txt >/dev/null && [ -s report.txt ] || fail "popreport -o wrote nothing"
finish flags
