#!/usr/bin/env bash
# A GPT-style language model (issue 38) as a user meets it: popplan validates, plans and
# tunes tests/data/gpt/gpt_tiny.yaml (2 blocks, width 128, 4 heads, 128 tokens, the head
# tied to the embedding), and poprun trains it a few steps.
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
grep -qF "  model parameters 445,952 in 28 tensors" <<<"$out" || fail "plan text: $(sed -n 5,7p <<<"$out")"

# GPT-2's four published sizes (vocabulary 50,257, 1,024 positions, the head tied): the
# plan text counts each one's parameters as published (Hugging Face's num_parameters()).
for size in "small 768 12 12 124,439,808" "medium 1024 24 16 354,823,168" \
  "large 1280 36 20 774,030,080" "xl 1600 48 25 1,557,611,200"; do
  read -r name width blocks heads want <<<"$size"
  {
    printf 'version: 1\nname: gpt2-%s\nmodel:\n  layers:\n' "$name"
    printf '    - {name: wte, type: embedding, vocabulary: 50257, positions: 1024, width: %s}\n' "$width"
    for i in $(seq 0 $((blocks - 1))); do
      printf '    - {name: h%s, type: decoder_block, heads: %s, hidden: %s}\n' "$i" "$heads" $((4 * width))
    done
    printf '    - {name: ln_f, type: layer_norm}\n'
    printf '    - {name: head, type: lm_head, vocabulary: 50257, tied_to: wte}\n'
    printf 'data: {dataset: text, path: text/fortunes.txt, sequence_length: 1024}\n'
  } >"$tmp/gpt2_$name.yaml"
  text=$(popplan plan "$tmp/gpt2_$name.yaml" 2>/dev/null || true)
  grep -qF "  model parameters $want in $((2 + 12 * blocks + 2)) tensors" <<<"$text" ||
    fail "gpt2-$name: $(grep -m1 'model parameters' <<<"$text"), want $want"
done

# examples/gpt2_xl.yaml (phased, a phase a block): the 48 blocks repeat the same rows,
# and the text folds them into one row each (it was 4,066 lines), every line within 100
# columns, the host-memory warning included; --format wide lists every row.
xl=$(popplan plan "$src/examples/gpt2_xl.yaml" 2>&1 || true)
[ "$(wc -l <<<"$xl")" -lt 400 ] || fail "gpt2-xl plan text is $(wc -l <<<"$xl") lines"
wide=$(awk 'length($0) > 100' <<<"$xl")
[ -z "$wide" ] || fail "gpt2-xl: lines over 100 columns: $wide"
grep -qE '^  h\{0\.\.47\}\.attn\.qkv\.weight +\| \[1600, 4800\] +\| remote inner\.attn\.qkv\.weight\[\{0\.\.47\}\]$' \
  <<<"$xl" || fail "gpt2-xl: no folded qkv row: $(grep -m3 qkv <<<"$xl")"
grep -qE '^  \{53\.\.100\}: h\{47\.\.0\} backward\+optimizer +\|' <<<"$xl" ||
  fail "gpt2-xl: the backward phases are not folded: $(grep -m3 backward <<<"$xl")"
all=$(popplan plan "$src/examples/gpt2_xl.yaml" --format wide 2>/dev/null || true)
grep -qF '{' <<<"$(grep -v '^  sync pattern\|^    GS' <<<"$all")" && fail "--format wide folds rows"
[ "$(grep -c '^  h[0-9]*\.attn\.qkv\.weight ' <<<"$all")" -eq 48 ] ||
  fail "--format wide lacks a block's qkv row"

# poprun trains it on the fortunes text (scripts/fetch_data.sh): the loss falls from
# ln 256 = 5.55 nats a byte, and every phase's measured memory is the plan's to the byte.
(cd "$tmp" && poprun train "$config" --steps 8 --run-dir "$tmp/run" >/dev/null 2>"$tmp/err") ||
  fail "poprun train exited $?: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/run/run.json" <<'PY' || fail "run file: see above"
import json, sys
r = json.load(open(sys.argv[1]))
loss = r["loss"]
assert len(loss) == 8 and loss[0] > 5.0 and loss[-1] < loss[0] - 1.0, loss
for ph in r["phases"] + r["eval"]["phases"]:
    for replica in ph["measured_memory"]:
        assert replica == ph["planned_memory"], (ph["name"], replica, ph["planned_memory"])
assert r["test"]["n_samples"] > 0 and r["test"]["loss"] < loss[0], r["test"]
PY
echo "ok"
