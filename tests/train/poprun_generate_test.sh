#!/usr/bin/env bash
# poprun generate as a user runs it: gpt_tiny trained a few steps on the fortunes text
# (scripts/fetch_data.sh), then text sampled from the run folder and from its checkpoint:
# a seed gives one text, temperature 0 is greedy (no seed changes it), --tokens N bytes
# come out, and bad input exits 2 naming what is wrong.
set -euo pipefail
config=$POPKIT_SOURCE_DIR/tests/data/gpt/gpt_tiny.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

poprun train "$config" --steps 6 --run-dir run >/dev/null 2>err || fail "train exited $?: $(cat err)"
prompt="The cat sat on the"
gen() { poprun generate "$@" 2>err || fail "generate $* exited $?: $(cat err)"; }

gen run --prompt "$prompt" --tokens 40 --seed 5 -o a.txt >a.out
gen run/checkpoint-step6.safetensors --prompt "$prompt" --tokens 40 --seed 5 -o b.txt >b.out
cmp -s a.txt b.txt || fail "seed 5 twice (run folder, checkpoint) gave two texts"
cmp -s a.out b.out || fail "seed 5 twice printed two texts"
[ "$(stat -c %s a.txt)" -eq $((${#prompt} + 40)) ] || fail "-o holds $(stat -c %s a.txt) bytes, not ${#prompt} + 40"
[ "$(head -c ${#prompt} a.txt)" = "$prompt" ] || fail "-o does not open with the prompt"
gen run --prompt "$prompt" --tokens 40 --seed 6 -o c.txt >/dev/null
! cmp -s a.txt c.txt || fail "seeds 5 and 6 gave the same 40 bytes"

gen run --prompt "$prompt" --tokens 30 --temperature 0 --seed 1 -o g1.txt >/dev/null
gen run --prompt "$prompt" --tokens 30 --temperature 0 --seed 2 -o g2.txt >/dev/null
cmp -s g1.txt g2.txt || fail "greedy (temperature 0) depends on the seed"
[ "$(stat -c %s g1.txt)" -eq $((${#prompt} + 30)) ] || fail "greedy wrote $(stat -c %s g1.txt) bytes"

# The printed text: printable bytes as they are, the rest escaped, one line ending it.
out=$(gen run --prompt $'a\x01b' --tokens 3 --temperature 0)
[[ $out == 'a\x01b'* ]] || fail "the prompt's byte 1 is not printed as \\x01: $out"

# An MLP checkpoint is not a language model.
poprun train "$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml" --steps 1 --run-dir mlp >/dev/null 2>&1 ||
  fail "tiny.yaml did not train"
expect2() {
  local want=$1; shift
  set +e; poprun generate "$@" >/dev/null 2>err; local rc=$?; set -e
  [ $rc -eq 2 ] || fail "generate $* exited $rc, not 2: $(cat err)"
  grep -qF -- "$want" err || fail "generate $*: no '$want' in: $(cat err)"
  grep -q "^poprun" err || fail "generate $*: the error does not name the tool: $(cat err)"
}
expect2 "not a text config" mlp --prompt a --tokens 2
expect2 "--tokens" run --prompt a --tokens 0
expect2 "--temperature" run --prompt a --tokens 2 --temperature -1
expect2 "--prompt" run --prompt "" --tokens 2
expect2 "--prompt" run --tokens 2
expect2 "nothere" nothere --prompt a --tokens 2
mkdir empty
expect2 "holds no checkpoint" empty --prompt a --tokens 2
cp run/checkpoint-step6.safetensors empty/
expect2 "no config.yaml beside it" empty/checkpoint-step6.safetensors --prompt a --tokens 2
expect2 "is a folder" run --prompt a --tokens 2 -o empty
echo "ok"
