#!/usr/bin/env bash
# A GPT-style language model (issue 38) as a user meets it today: popplan validates,
# plans and tunes tests/data/gpt/gpt_tiny.yaml (2 blocks, width 128, 4 heads, 128 tokens,
# the head tied to the embedding); poprun refuses it with exit 2 before making a folder,
# until the engine runs the language-model kinds.
set -euo pipefail
src=$POPKIT_SOURCE_DIR
config=$src/tests/data/gpt/gpt_tiny.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

popplan validate "$config" >/dev/null 2>&1 || fail "validate exited $?"
out=$(popplan plan "$config") || fail "plan exited $?"
grep -qF "Plan gpt-tiny: fits" <<<"$out" || fail "plan text opens: $(head -1 <<<"$out")"
popplan plan "$config" --format json -o "$tmp/plan.json" >/dev/null 2>&1 || fail "plan --format json exited $?"
# 256 x 128 + 128 x 128 for the embedding, 198,272 a block, 256 for ln_f; the head's
# weight is the embedding's table, counted once.
/usr/bin/python3 - "$tmp/plan.json" <<'PY' || fail "plan file: see above"
import json, sys
p = json.load(open(sys.argv[1]))
params = sum(v["nelms"] for v in p["variables"] if v["role"] != "optimizer_state")
assert params == 445952, params
assert p["positions"] == 128 and p["n_classes"] == 256, (p.get("positions"), p["n_classes"])
assert not any(v["name"].startswith("head.") for v in p["variables"])
PY
popplan tune "$config" --memory-per-replica 64MiB >/dev/null 2>&1 || fail "tune exited $?"

set +e
err=$(cd "$tmp" && poprun train "$config" --steps 1 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 2 ] || fail "poprun train exited $rc, want 2: $err"
grep -qF "poprun does not train or evaluate language models yet" <<<"$err" || fail "poprun said: $err"
[ ! -e "$tmp/runs" ] || fail "poprun made a run folder"
echo "ok"
