#!/usr/bin/env bash
# popplan plan as a user runs it: exit 0 when the plan fits, 1 when it does not (with
# the tuner's cheapest fix), 2 for an invalid config; text reads like a schedule printout; JSON validates against the schema.
set -euo pipefail
src=$POPKIT_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(popplan plan "$src/examples/mnist.yaml") || fail "plan mnist.yaml exited $?"
for want in "phase 1: fc1 forward" "phase 4: fc4 forward+loss+backward+optimizer" \
            "phase 7: fc1 backward+optimizer" "remote_load     x row 1 -> inner.in" \
            "Fits: peak"; do
  grep -qF -- "$want" <<<"$out" || fail "plan text lacks '$want'"
done
grep -qE '^  x +\| activations +\| float32 +\| \[8, 512\] +\| +3 x 4 \| +12 \|' <<<"$out" \
  || fail "plan text lacks the x buffer of 3 rows x 4 steps"

set +e
popplan plan "$src/examples/mnist.yaml" --set device.memory_per_replica=1MiB >"$tmp/small.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "a plan that does not fit exited $rc, want 1"
grep -qF "Does not fit: phase 'fc1 backward+optimizer'" "$tmp/small.txt" || fail "no not-fitting report"

# The tuner's advice, on a model whose cheapest fix is known: one linear 4 -> 3 in
# standard mode peaks at 460 B with its Adam state (2 x 15 float32 = 120 B) on device all
# the time; one byte less fits with that state in streaming memory alone (the one single
# setting that lowers the peak), at 460 - 120 = 340 B. JSON carries the same advice.
cat >"$tmp/tiny.yaml" <<'YAML'
version: 1
model: {input_shape: [4], layers: [{name: fc, out_features: 3}]}
training: {micro_batch_size: 2, gradient_accumulation: 2}
data: {dataset: synthetic}
device: {profile: ipu-mk2, memory_per_replica: 459}
YAML
set +e
popplan plan "$tmp/tiny.yaml" >"$tmp/tiny.txt" 2>&1
rc=$?
popplan plan "$tmp/tiny.yaml" --format json -o "$tmp/tiny.json" 2>"$tmp/tiny.err"
set -e
[ "$rc" = 1 ] || fail "tiny.yaml at 459 B exited $rc, want 1"
grep -qE '^  fits with: --set remote.optimizer_state=true \(peak 340 B of 459 B, est\. [0-9,]+ samples/s; the fewest changes that fit of the 54 candidates popplan tune planned\)$' \
  "$tmp/tiny.txt" || fail "advice: $(grep -F 'fits with' "$tmp/tiny.txt")"
grep -qF "popplan: fits with: --set remote.optimizer_state=true (peak 340 B" "$tmp/tiny.err" \
  || fail "advice on stderr beside JSON: $(cat "$tmp/tiny.err")"
/usr/bin/python3 - "$src/schemas/plan.schema.json" "$tmp/tiny.json" <<'PY' || fail "tiny.json advice"
import json, sys, jsonschema
schema, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator(schema).validate(plan)
a = plan["not_fitting"]["advice"]
assert a["fits"] and a["settings"] == ["remote.optimizer_state=true"] and a["peak_bytes"] == 340, a
PY
# Below every candidate's peak: nothing fits, and the advice says the least peak.
set +e
popplan plan "$tmp/tiny.yaml" --set device.memory_per_replica=100 >"$tmp/none.txt" 2>&1
set -e
grep -qE '^  nothing popplan tune planned fits: the least peak of its 54 candidates is [0-9]+ B of 100 B, with --set ' \
  "$tmp/none.txt" || fail "no-fit advice: $(grep -F 'nothing' "$tmp/none.txt")"

printf 'version: 1\nmodel: {layers: []}\n' >"$tmp/bad.yaml"
set +e
popplan plan "$tmp/bad.yaml" >/dev/null 2>"$tmp/bad.err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "an invalid config exited $rc, want 2"
grep -q "error" "$tmp/bad.err" || fail "an invalid config printed no diagnostics"

popplan plan "$src/examples/mnist.yaml" --format json -o "$tmp/plan.json" || fail "json plan exited $?"
/usr/bin/python3 - "$src/schemas/plan.schema.json" "$tmp/plan.json" <<'PY' || fail "plan.json does not validate"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(schema).validate(json.load(open(sys.argv[2])))
PY
# The host memory poprun needs: data read from files is left out, synthetic data counted;
# a run this machine could not hold is a warning (the plan may run elsewhere), exit 0.
grep -qF "host memory of poprun on a CPU 60.26 MiB + the datasets (streaming memory 17.32 MiB, device memory 12.46 MiB, host buffers 10.47 MiB, overhead 20.00 MiB)" <<<"$out" \
  || fail "plan text lacks the host memory line: $(grep -F 'host memory' <<<"$out")"
/usr/bin/python3 - "$tmp/plan.json" <<'PY' || fail "plan.json host_memory"
import json, sys
h = json.load(open(sys.argv[1]))["host_memory"]
assert h["datasets_counted"] is False and h["datasets"] == 0, h
assert h["total"] == h["streaming"] + h["device"] + h["host_buffers"] + h["overhead"], h
PY
synthetic=$(popplan plan "$src/examples/mnist.yaml" --set data.dataset=synthetic) || fail "synthetic plan"
grep -qF "host memory of poprun on a CPU 67.93 MiB (datasets 7.55 MiB, streaming memory 17.32 MiB" <<<"$synthetic" \
  || fail "synthetic plan: $(grep -F 'host memory' <<<"$synthetic")"
set +e
POPKIT_HOST_MEMORY=1MiB popplan plan "$src/examples/mnist.yaml" >/dev/null 2>"$tmp/small.err"
rc=$?
set -e
[ "$rc" = 0 ] || fail "a plan too big for this machine exited $rc, want 0"
grep -qF "popplan: warning: poprun would refuse this run here: the run needs 60.26 MiB of host memory besides its datasets (streaming memory 17.32 MiB, device memory 12.46 MiB, host buffers 10.47 MiB, overhead 20.00 MiB) but this machine has 1.00 MiB available (POPKIT_HOST_MEMORY)" "$tmp/small.err" \
  || fail "no host memory warning: $(cat "$tmp/small.err")"
# The evaluation plan: forward only, eval.micro_batch_size, a phase per layer when phased,
# the logits to the host; no optimizer state, no gradients, no backward.
ev=$(popplan plan "$src/examples/mnist.yaml" --eval) || fail "plan --eval exited $?"
for want in "Evaluation plan mnist-phased-rts" "micro-batch 80, gradient accumulation 4" \
            "Schedule (per evaluation batch)" "phase 1: fc1 forward" "phase 4: fc4 forward" \
            "host_store      logits -> host"; do
  grep -qF -- "$want" <<<"$ev" || fail "eval plan text lacks '$want'"
done
for unwanted in "backward" "optimizer_step" "adam" "loss" "gradient_accumulators    "; do
  ! grep -qF -- "$unwanted" <<<"$(sed -n '/^Schedule/,$p' <<<"$ev")" || fail "eval plan has '$unwanted'"
done
popplan plan "$src/examples/mnist.yaml" --eval --format json -o "$tmp/eval.json" || fail "eval json"
/usr/bin/python3 - "$src/schemas/plan.schema.json" "$tmp/eval.json" <<'PY' || fail "eval plan.json"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator(schema).validate(plan)
assert plan["program"] == "eval", plan["program"]
assert all(v["role"] != "optimizer_state" for v in plan["variables"])
PY
popreport memory "$tmp/eval.json" | grep -qF "fc4 forward" || fail "popreport memory of an eval plan"
echo "popplan plan: ok"
