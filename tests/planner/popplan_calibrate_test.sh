#!/usr/bin/env bash
# popplan calibrate as a user runs it (issue 17, item 2): the shipped ipu-mk2 profile
# prices the seven measured configs of bench/calibration/ipu-mk2.csv within ±15%, ranked as
# measured, the row marked --eval with the evaluation plan (issue 39, item 5); fitting
# again from the shipped file reproduces it; a measurement the profile
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
                 "all state sharded", "on-chip optimizer (nothing remote)",
                 "notebook train session (GA 4)", "inference (R 1; micro-batch 80)"], names
measured = [c["measured"] for c in r["cases"]]
assert measured == [43418.9, 50909.2, 67403.4, 72570.0, 107418.9, 37989.2, 99971.5], measured
for c in r["cases"]:
    assert abs(c["estimated"] / c["measured"] - 1) <= 0.15, c
assert r["same_order"] and r["fitted"] == [], r
PY

# The --eval row is priced with the evaluation plan of its config and overrides, as
# `popplan plan --eval` prices it (not the training plan), one run of 80 samples.
eval_sets=(--set replication.factor=1 --set eval.micro_batch_size=80
           --set training.gradient_accumulation=1 --set sharding.enabled=false)
plan_eval=$(popplan plan examples/mnist_offchip_optimizer.yaml --eval "${eval_sets[@]}" \
  --format json) || fail "plan --eval exited $?"
plan_train=$(popplan plan examples/mnist_offchip_optimizer.yaml "${eval_sets[@]}" \
  --format json) || fail "plan exited $?"
/usr/bin/python3 - "$json" "$plan_eval" "$plan_train" <<'PY' || fail "the --eval row: $json"
import json, sys
r, ev, tr = (json.loads(a) for a in sys.argv[1:])
row = r["cases"][-1]
assert ev["program"] == "eval" and ev["global_batch_size"] == 80, ev["program"]
assert abs(row["estimated"] / ev["estimated_samples_per_second"] - 1) < 1e-6, row
assert abs(row["estimated"] / tr["estimated_samples_per_second"] - 1) > 0.05, row
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
# A flag in `set` other than --eval is no override.
printf 'case,config,set,samples_per_second\nx,%s,--evaluate,1000\n' \
  "$POPKIT_SOURCE_DIR/examples/mnist.yaml" >"$tmp/flag.csv"
expect 2 "flag.csv:2:" -- popplan calibrate --table "$tmp/flag.csv"
expect 2 "set: '--evaluate' is not an override (key=value) nor --eval" -- \
  popplan calibrate --table "$tmp/flag.csv"
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
