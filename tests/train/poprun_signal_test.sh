#!/usr/bin/env bash
# SIGTERM and SIGINT during `poprun train`: the current step finishes, a checkpoint is
# written, exit 130 with a line saying where; the checkpoint evaluates and resumes.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

for sig in TERM INT; do
  dir="run-$sig"
  # Far more steps than the test waits for; plain progress lines on stderr.
  poprun train "$config" --steps 10000000 --out "$dir/run.json" >"$sig.out" 2>"$sig.err" &
  pid=$!
  for _ in $(seq 100); do
    grep -q "step 1/" "$sig.err" 2>/dev/null && break
    sleep 0.1
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || { fail "SIG$sig: exit $rc, want 130; stderr: $(cat "$sig.err")"; continue; }
  line=$(grep "^poprun: stopped by SIG$sig at step " "$sig.err")
  [ -n "$line" ] || { fail "SIG$sig: no 'stopped' line: $(cat "$sig.err")"; continue; }
  step=$(sed -E 's/.* at step ([0-9]+):.*/\1/' <<<"$line")
  ckpt="$dir/checkpoint-step$step.safetensors"
  grep -qF "checkpoint written to $ckpt; continue with --resume $ckpt" <<<"$line" || fail "SIG$sig: $line"
  [ -f "$ckpt" ] || { fail "SIG$sig: no $ckpt"; continue; }
  ls "$dir" | grep -q '\.tmp' && fail "SIG$sig: a temporary file was left behind: $(ls "$dir")"
  poprun eval "$config" --checkpoint "$ckpt" >/dev/null || fail "SIG$sig: eval of $ckpt failed"
  out=$(poprun train "$config" --resume "$ckpt" --steps $((step + 3)) --out "$dir/more/run.json" 2>/dev/null)
  # The summary counts this process's steps and states the run's total apart.
  grep -qE "^trained tiny: 3 steps in [0-9.]+ s \(this process, resumed at step $step\); $((step + 3)) steps in total$" <<<"$out" ||
    fail "SIG$sig: resume: $out"
done

finish "poprun signals"
