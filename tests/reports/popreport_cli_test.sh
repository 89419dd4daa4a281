#!/usr/bin/env bash
# popreport as a user runs it: exit codes (0 ok, 1 gate failed, 2 invalid input) and the
# messages that name the file, the field, the row and by how much.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
data="$POPKIT_SOURCE_DIR/tests/data/reports"
cd "$data" || exit 1


for verb in memory throughput compare; do
  for format in text markdown csv json; do
    expect 0 "" -- popreport "$verb" base.json nosharding.json --format "$format"
  done
done
# JSON output parses.
popreport compare base.json fast.json --format json | /usr/bin/python3 -c 'import json,sys; json.load(sys.stdin)' \
  || fail "compare --format json is not JSON"

# The gate, both directions.
expect 0 "" -- popreport compare base.json fast.json --fail-if 'throughput < -5%' --fail-if 'peak_memory > +2%'
expect 1 "popreport compare: gate failed: nosharding: throughput -20.0% < -5% (512.0 samples/s vs 640.0 samples/s of baseline base)" \
  -- popreport compare base.json nosharding.json --fail-if 'throughput < -5%'
expect 1 "popreport compare: gate failed: nosharding: peak_memory +50.0% > +2%" \
  -- popreport compare base.json nosharding.json --fail-if 'peak_memory > +2%'
expect 0 "" -- popreport compare base.json fast.json --baseline fast --fail-if 'throughput < -5%'
expect 1 "popreport compare: gate failed: base: throughput -3.0% < -2%" \
  -- popreport compare base.json fast.json --baseline fast --fail-if 'throughput < -2%'

# Invalid input: exit 2, the file and the field named.
expect 2 "popreport memory: error: not_json.json:1:1: not JSON: a JSON document begins with '{', '[', a string, a number, true, false or null" -- popreport memory not_json.json
expect 2 'popreport throughput: error: wrong_kind.json: kind: "config" is neither a plan nor a run file' -- popreport throughput wrong_kind.json
expect 2 "popreport compare: error: newer_version.json: version: 2 is newer than this build of popkit reads (1)" -- popreport compare base.json newer_version.json
expect 2 "popreport memory: error: missing_field.json: phases[1].planned_memory.peak: missing" -- popreport memory missing_field.json
expect 2 "popreport memory: error: no_such_file.json: no such file" -- popreport memory no_such_file.json
expect 2 "" -- popreport memory base.json --format xml
# A negative time is a broken file, not a report (it was shown as a step time).
tmp=$(mktemp -d)
/usr/bin/python3 - base.json "$tmp/negative.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["step_seconds"][1] = -0.5
json.dump(run, open(sys.argv[2], "w"))
PY
expect 2 "popreport throughput: error: $tmp/negative.json: step_seconds[1]: -0.5 is negative; a time or a rate is >= 0" \
  -- popreport throughput "$tmp/negative.json"
# Nor is a time past any real one: two of 1e308 summed to "total step time inf s".
/usr/bin/python3 - base.json "$tmp/huge.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["step_seconds"][0] = run["step_seconds"][1] = 1e308
json.dump(run, open(sys.argv[2], "w"))
PY
expect 2 "popreport throughput: error: $tmp/huge.json: step_seconds[0]: 1e+308 is past any time or rate (at most 1e+30)" \
  -- popreport throughput "$tmp/huge.json"
# A baseline of 0 s a step gives no ratio (n/a in the table): the gate checks no row (it
# failed with "+inf%").
/usr/bin/python3 - base.json "$tmp/zero.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["step_seconds"] = [0.0 for _ in run["step_seconds"]]
json.dump(run, open(sys.argv[2], "w"))
PY
expect 1 "popreport compare: gate failed: 'execution_time > +5%' checked no row: every row's ratio is n/a: the baseline \"zero\" has execution_time 0" \
  -- popreport compare "$tmp/zero.json" fast.json --fail-if 'execution_time > +5%'
/usr/bin/python3 - quick_plan.json "$tmp/negative_plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["phases"][0]["estimated_seconds"] = -1e-3
json.dump(plan, open(sys.argv[2], "w"))
PY
expect 2 "phases[0].estimated_seconds: -0.001 is negative; a time or a rate is >= 0" \
  -- popreport throughput "$tmp/negative_plan.json"
# A gate that compares no row fails: an IPU estimate against a CPU run has no time ratio
# (it passed, silently).
expect 1 "popreport compare: gate failed: 'throughput < -5%' checked no row: every row's ratio is n/a" \
  -- popreport compare quick_plan.json base.json --fail-if 'throughput < -5%'
rm -rf "$tmp"
expect 2 "popreport compare: error: --fail-if 'throughput -5%': want METRIC < PERCENT" -- popreport compare base.json fast.json --fail-if 'throughput -5%'
expect 2 'popreport compare: error: --baseline: no row is named "nope" (rows: base, fast)' -- popreport compare base.json fast.json --baseline nope
expect 2 "popreport compare: error: --names: 1 names for 2 files" -- popreport compare base.json fast.json --names a
expect 2 "" -- popreport compare

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Only regular files are read, by every verb and wherever the file stands in the list: a
# FIFO or a device would block or never end (timeout stops the hang that was); a folder
# is a run folder, read for its run.json.
mkfifo "$tmp/fifo"
hint="; give the path of a plan or run file"
for verb in memory throughput compare; do
  expect 2 "popreport $verb: error: /dev/zero: is not a regular file (a character device)$hint" \
    -- timeout 20 popreport "$verb" /dev/zero
  expect 2 "popreport $verb: error: $tmp/fifo: is not a regular file (a FIFO)$hint" \
    -- timeout 20 popreport "$verb" base.json "$tmp/fifo"
  expect 2 "popreport $verb: error: $tmp: a folder without run.json: give a plan or run file, or a run folder whose run has ended" \
    -- timeout 20 popreport "$verb" "$tmp"
done
# A file too large to report on is refused before it is read (a sparse file: no disk used):
# a 1 GB run file took 45-60 s and 4 GB; the limit is above the plan of the largest config
# (14,000 phased layers: 264 MB) and far above any run file's.
truncate -s 1G "$tmp/huge.json"
expect 2 "popreport memory: error: $tmp/huge.json: 1073741824 bytes, more than the 536870912 a plan or run file may have" \
  -- timeout 20 popreport memory "$tmp/huge.json"

# Numbers a double cannot hold, and integers beyond 64 bits, name the file and the place.
sed 's/"median": 640.0/"median": 1e999/' base.json >"$tmp/overflow.json"
expect 2 "popreport throughput: error: $tmp/overflow.json:215:15: number out of range: 1e999" \
  -- popreport throughput "$tmp/overflow.json"
echo 1e999 >"$tmp/number.json"
expect 2 "popreport memory: error: $tmp/number.json:1:1: number out of range: 1e999" -- popreport memory "$tmp/number.json"
sed 's/"warmup_steps": 1/"warmup_steps": 18446744073709551615/' base.json >"$tmp/uint64.json"
expect 2 "popreport throughput: error: $tmp/uint64.json: throughput.warmup_steps: 18446744073709551615 is out of range (at most 9223372036854775807)" \
  -- popreport throughput "$tmp/uint64.json"
sed '3s/"version": 1/"version": 4294967297/' base.json >"$tmp/version.json"
expect 2 "popreport memory: error: $tmp/version.json: version: 4294967297 is newer than this build of popkit reads (1)" \
  -- popreport memory "$tmp/version.json"
sed 's/^  "version": 6,$/  "version": 4294967297,/' quick_plan.json >"$tmp/plan_version.json"
expect 2 "popreport memory: error: $tmp/plan_version.json: version: plan format 4294967297 is newer than this build reads (6)" \
  -- popreport memory "$tmp/plan_version.json"
# Nesting a million deep (in the resolved config, which reports never look into) is
# refused at the level too many, not by a stack overflow.
/usr/bin/python3 -c 'import sys; t = open("base.json").read(); sys.stdout.write(t.replace("\"config\": {", "\"config\": {\"deep\": " + "[" * 1000000 + "]" * 1000000 + ", ", 1))' >"$tmp/deep.json"
expect 2 "popreport memory: error: $tmp/deep.json:5:276: nesting deeper than 256 levels" -- popreport memory "$tmp/deep.json"

# The gate's bound: a number beyond a double is an input error; any amount of space is
# fine (a regex overflowed the stack on it).
many_ones=$(printf '1%.0s' {1..400})
expect 2 "popreport compare: error: --fail-if 'throughput < $many_ones%': $many_ones% is out of range" \
  -- popreport compare base.json fast.json --fail-if "throughput < $many_ones%"
spaces=$(printf ' %.0s' {1..100000})
expect 0 "" -- popreport compare base.json fast.json --fail-if "throughput <${spaces}-5%"

# Names that are not UTF-8 (a file name, --names) still give JSON: such bytes become U+FFFD.
cp base.json "$tmp/"$'b\xfe'.json
popreport compare "$tmp/"$'b\xfe'.json fast.json --names $'a\xff',b --format json \
  | /usr/bin/python3 -c 'import json, sys; assert json.load(sys.stdin)["tables"][0]["rows"][0]["case"] == "a\ufffd"' \
  || fail "compare --format json with a name that is not UTF-8"
popreport memory "$tmp/"$'b\xfe'.json --format json | /usr/bin/python3 -c 'import json, sys; json.load(sys.stdin)' \
  || fail "memory --format json of a file whose name is not UTF-8"

finish "popreport cli"
