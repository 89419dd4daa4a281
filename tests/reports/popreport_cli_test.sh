#!/usr/bin/env bash
# popreport as a user runs it: exit codes (0 ok, 1 gate failed, 2 invalid input) and the
# messages that name the file, the field, the row and by how much.
set -uo pipefail
data="$POPKIT_SOURCE_DIR/tests/data/reports"
cd "$data" || exit 1
failures=0

# expect RC STDERR_SUBSTRING -- COMMAND...
expect() {
  local want_rc=$1 want_err=$2
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" != "$want_rc" ]; then
    echo "FAIL: '$*' exited $rc, want $want_rc; stderr: $err"
    failures=$((failures + 1))
  elif [ -n "$want_err" ] && ! grep -qF -- "$want_err" <<<"$err"; then
    echo "FAIL: '$*' stderr is '$err', want it to contain '$want_err'"
    failures=$((failures + 1))
  fi
}

for verb in memory throughput compare; do
  for format in text markdown csv json; do
    expect 0 "" -- popreport "$verb" base.json nosharding.json --format "$format"
  done
done
# JSON output parses.
popreport compare base.json fast.json --format json | /usr/bin/python3 -c 'import json,sys; json.load(sys.stdin)' \
  || { echo "FAIL: compare --format json is not JSON"; failures=$((failures + 1)); }

# The gate, both directions.
expect 0 "" -- popreport compare base.json fast.json --fail-if 'throughput < -5%' --fail-if 'peak_memory > +2%'
expect 1 "popreport: gate failed: nosharding: throughput -20.0% < -5% (512.0 samples/s vs 640.0 samples/s of baseline base)" \
  -- popreport compare base.json nosharding.json --fail-if 'throughput < -5%'
expect 1 "popreport: gate failed: nosharding: peak_memory +50.0% > +2%" \
  -- popreport compare base.json nosharding.json --fail-if 'peak_memory > +2%'
expect 0 "" -- popreport compare base.json fast.json --baseline fast --fail-if 'throughput < -5%'
expect 1 "popreport: gate failed: base: throughput -3.0% < -2%" \
  -- popreport compare base.json fast.json --baseline fast --fail-if 'throughput < -2%'

# Invalid input: exit 2, the file and the field named.
expect 2 "popreport: error: not_json.json: not JSON: parse error at line 1, column 1" -- popreport memory not_json.json
expect 2 'popreport: error: wrong_kind.json: kind: "config" is neither a plan nor a run file' -- popreport throughput wrong_kind.json
expect 2 "popreport: error: newer_version.json: version: 2 is newer than this build of popkit reads (1)" -- popreport compare base.json newer_version.json
expect 2 "popreport: error: missing_field.json: phases[1].planned_memory.peak: missing" -- popreport memory missing_field.json
expect 2 "popreport: error: no_such_file.json: cannot open for reading" -- popreport memory no_such_file.json
expect 2 "" -- popreport memory base.json --format xml
expect 2 "popreport: error: --fail-if 'throughput -5%': want METRIC < PERCENT" -- popreport compare base.json fast.json --fail-if 'throughput -5%'
expect 2 'popreport: error: --baseline: no row is named "nope" (rows: base, fast)' -- popreport compare base.json fast.json --baseline nope
expect 2 "popreport: error: --names: 1 names for 2 files" -- popreport compare base.json fast.json --names a
expect 2 "" -- popreport compare

if [ "$failures" != 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "popreport cli: ok"
