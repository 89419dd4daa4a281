#!/usr/bin/env bash
# popplan calibrate as a user runs it (issue 17, item 2): the shipped ipu-mk2 profile
# prices the five measured configs of bench/calibration/ipu-mk2.csv within ±15%, ranked as
# measured; fitting again from the shipped file reproduces it; a measurement the profile
# cannot match fails the tolerance (1); a broken table is invalid input (2). Device
# profiles given by path, and an installed-style profile directory, are found.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
cd "$POPKIT_SOURCE_DIR" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
table=bench/calibration/ipu-mk2.csv

# The shipped profile, priced as it is, in JSON.
json=$(popplan calibrate --table "$table" --no-fit --tolerance 0.15 --format json 2>/dev/null)
rc=$?
[ "$rc" = 0 ] || fail "calibrate --no-fit --tolerance 0.15 exited $rc"
/usr/bin/python3 - "$json" <<'PY' || fail "residuals of the shipped profile: $json"
import json, sys
r = json.loads(sys.argv[1])
names = [c["name"] for c in r["cases"]]
assert names == ["no sharding", "state of fc1.weight sharded", "state of all weights sharded",
                 "all state sharded", "on-chip optimizer (nothing remote)"], names
measured = [c["measured"] for c in r["cases"]]
assert measured == [43418.9, 50909.2, 67403.4, 72570.0, 107418.9], measured
for c in r["cases"]:
    assert abs(c["estimated"] / c["measured"] - 1) <= 0.15, c
est = [c["estimated"] for c in r["cases"]]
assert est == sorted(est), est  # the same order as measured
assert r["same_order"] and r["fitted"] == [], r
PY

# The fit, from the shipped file's priors, writes the shipped file again.
popplan calibrate --table "$table" --write "$tmp/ipu-mk2.yaml" >"$tmp/fit.txt" 2>&1 \
  || fail "calibrate exited $?: $(cat "$tmp/fit.txt")"
diff share/profiles/ipu-mk2.yaml "$tmp/ipu-mk2.yaml" >"$tmp/diff.txt" \
  || fail "fitting again does not reproduce share/profiles/ipu-mk2.yaml: $(cat "$tmp/diff.txt")"
grep -q "worst residual [0-9.]*%; the estimates rank the cases as measured" "$tmp/fit.txt" \
  || fail "fit report: $(cat "$tmp/fit.txt")"

# A throughput no profile of the model reaches (the on-chip row 3x faster) fails the
# tolerance; a row out of order is caught too.
sed 's/,107418.9$/,322256.7/' "$table" | sed "s#\.\./\.\./examples#$POPKIT_SOURCE_DIR/examples#" \
  >"$tmp/off.csv"
expect 1 "popplan calibrate: worst residual" -- \
  popplan calibrate --table "$tmp/off.csv" --no-fit --tolerance 0.15
sed 's/,43418.9$/,80000/' "$table" | sed "s#\.\./\.\./examples#$POPKIT_SOURCE_DIR/examples#" \
  >"$tmp/order.csv"
expect 1 "rank the cases differently" -- \
  popplan calibrate --table "$tmp/order.csv" --no-fit --tolerance 0.5

# A broken table: the line and the rule.
printf 'case,config,samples_per_second\n' >"$tmp/bad.csv"
expect 2 "bad.csv:1:1: error: the first line must be the header 'case,config,set,samples_per_second'" -- \
  popplan calibrate --table "$tmp/bad.csv"
printf 'case,config,set,samples_per_second\nx,%s,,fast\n' "$POPKIT_SOURCE_DIR/examples/mnist.yaml" \
  >"$tmp/bad2.csv"
expect 2 "bad2.csv:2:" -- popplan calibrate --table "$tmp/bad2.csv"
# The header alone: no case to fit (it ended in a segmentation fault).
printf 'case,config,set,samples_per_second\n' >"$tmp/header.csv"
expect 2 "header.csv:1:1: error: the table has its header but no rows: it needs a measured case" -- \
  popplan calibrate --table "$tmp/header.csv"
expect 2 "samples_per_second: expected a number > 0, got 'fast'" -- \
  popplan calibrate --table "$tmp/bad2.csv"
expect 2 "--fit overheads.op_secs: not a parameter of a profile" -- \
  popplan calibrate --table "$table" --fit overheads.op_secs

# device.profile as a path relative to the config, and POPKIT_PROFILE_PATH first.
mkdir -p "$tmp/run" "$tmp/profiles"
sed 's/^name: ipu-mk2/name: my-ipu/' share/profiles/ipu-mk2.yaml >"$tmp/profiles/my-ipu.yaml"
sed 's#profile: ipu-mk2#profile: ../profiles/my-ipu.yaml#' examples/mnist.yaml >"$tmp/run/c.yaml"
out=$(popplan plan "$tmp/run/c.yaml") || fail "plan with a profile file exited $?"
grep -q "samples/s on my-ipu$" <<<"$out" || fail "plan with a profile file: $(tail -3 <<<"$out")"
mkdir -p "$tmp/dir"
sed 's/^name: ipu-mk2/name: ipu-mk2-local/' share/profiles/ipu-mk2.yaml >"$tmp/dir/ipu-mk2.yaml"
out=$(POPKIT_PROFILE_PATH=$tmp/dir popplan plan examples/mnist.yaml) || fail "plan exited $?"
grep -q "samples/s on ipu-mk2-local$" <<<"$out" || fail "POPKIT_PROFILE_PATH: $(tail -3 <<<"$out")"

finish popplan_calibrate
