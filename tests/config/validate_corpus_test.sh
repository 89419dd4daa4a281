#!/usr/bin/env bash
# Every case of the bad-input corpus, through the real `popplan validate` run from the
# corpus directory: exit code 2, stdout exactly <case>.expected followed by the
# summary line "<case>.yaml: invalid (N errors)". CTest's TIMEOUT catches a hang.
set -uo pipefail
cd "$POPKIT_SOURCE_DIR/tests/data/invalid" || exit 1
n_cases=0
n_failed=0
for expected in *.expected; do
  name=${expected%.expected}
  n_cases=$((n_cases + 1))
  out=$(popplan validate "$name.yaml")
  rc=$?
  if [ "$rc" != 2 ]; then
    echo "FAIL: $name: exit $rc, want 2"
    n_failed=$((n_failed + 1))
    continue
  fi
  body=$(sed '$d' <<<"$out")
  summary=$(tail -n 1 <<<"$out")
  if [ "$body" != "$(cat "$expected")" ]; then
    echo "FAIL: $name: output differs from $expected:"
    diff <(cat "$expected") <(printf '%s\n' "$body") | head -20
    n_failed=$((n_failed + 1))
  fi
  case "$summary" in
    "$name.yaml: invalid ("*" error"*")") ;;
    *) echo "FAIL: $name: summary line '$summary'"; n_failed=$((n_failed + 1)) ;;
  esac
done
[ "$n_cases" -ge 40 ] || { echo "FAIL: only $n_cases corpus cases, want >= 40"; exit 1; }
[ "$n_failed" = 0 ] || { echo "$n_failed of $n_cases cases failed"; exit 1; }
# --format json: one document, valid false, one error per case at least.
out=$(popplan validate --format json tabs.yaml)
[ $? = 2 ] || { echo "FAIL: --format json exit code"; exit 1; }
/usr/bin/python3 -c '
import json, sys
doc = json.loads(sys.argv[1])
assert doc["valid"] is False, doc
report = doc["files"][0]["report"]
assert report["errors"] == 3 and report["diagnostics"][0]["line"] == 3, report
' "$out" || { echo "FAIL: --format json output: $out"; exit 1; }
echo "corpus: $n_cases cases, all exit 2 with their expected diagnostics"
