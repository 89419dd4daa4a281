#!/usr/bin/env bash
# SIGTERM in the middle of a long training step (examples/quick.yaml at R 4096: a step
# takes about 0.4 s here): poprun abandons the step, since its update has not begun,
# and exits 130, naming the step the checkpoint holds (how soon is bench/stop_latency.sh's
# to measure, not a test's: a sanitized build takes seconds to write the checkpoint and
# run file at R 4096; the time is shown in the table below); resumed
# from that checkpoint, the run ends on the bytes of an uninterrupted run of the same
# steps. The signal goes 0.02 s after poprun reports step 1, early in step 2, before its
# optimizer ops; a try whose signal found the update begun (poprun then finishes the
# step, as it must) is shown and made again, up to 3 tries.
#
#   tests/train/poprun_step_signal_test.sh [--replicas R]
#
# Needs poprun on PATH and POPKIT_SOURCE_DIR (as under ctest).
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
replicas=4096
while [[ $# -gt 0 ]]; do
  case "$1" in
    --replicas) replicas="$2"; shift 2 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
done
config="$POPKIT_SOURCE_DIR/examples/quick.yaml"
sets=(--set replication.factor="$replicas" --set data.synthetic_train=$((replicas * 32))
  --set data.synthetic_test=$((replicas * 8)))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

now() { date +%s.%N; }
# Until poprun reports step 1 on err (at most a minute).
wait_step1() {
  for _ in $(seq 1200); do
    grep -q "step 1/" err 2>/dev/null && return
    sleep 0.05
  done
}
# start DELAY ARGS...: `poprun train CONFIG ARGS` in the background (its pid in pid,
# its streams in out and err), returning DELAY s after it reports step 1.
start() {
  local delay=$1
  shift
  # Emptied here, not by the background job's redirection: wait_step1 could read the
  # previous run's "step 1/" before that job opens the file.
  : >out
  : >err
  poprun train "$config" "$@" >>out 2>>err &
  pid=$!
  wait_step1
  sleep "$delay"
}
echo "| try | exit | signal to exit (s) | poprun said |"
echo "|---|---:|---:|---|"
ckpt=""
for try in 1 2 3; do
  dir="stopped-$try"
  start 0.02 "${sets[@]}" --steps 1000000 --run-dir "$dir"
  sent=$(now)
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  took=$(awk -v a="$sent" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
  said=$(grep -m1 "stopped before its update" err)
  echo "| $try | $rc | $took | ${said:-$(grep -m1 '^poprun: stopped' err)} |"
  [ "$rc" = 130 ] || { fail "try $try: exit $rc, want 130; stderr: $(cat err)"; break; }
  # A stop that ends the run within the notice's delay (1 s) is not said twice.
  if grep -q "stopping after the update in progress" err &&
    awk -v t="$took" 'BEGIN { exit !(t < 0.9) }'; then
    fail "try $try: ended $took s after the signal, yet said it was still stopping"
  fi
  [ -n "$said" ] || continue
  grep -qF "step 2 stopped before its update; the checkpoint holds step 1" err ||
    fail "try $try: $said"
  grep -qF "poprun: stopped by SIGTERM at step 1: checkpoint written to $dir/checkpoint-step1.safetensors" err ||
    fail "try $try: $(grep '^poprun: stopped' err)"
  ckpt="$dir/checkpoint-step1.safetensors"
  break
done
if [ -z "$ckpt" ]; then
  fail "no SIGTERM 0.02 s into step 2 stopped it before its update (3 tries; table above)"
else
  # The abandoned step taken again from the checkpoint, then one more: the weights and
  # optimizer state of an uninterrupted run of 3 steps, byte for byte.
  poprun train "$config" "${sets[@]}" --resume "$ckpt" --steps 3 --run-dir resumed -q >/dev/null 2>&1 ||
    fail "resume from $ckpt failed"
  poprun train "$config" "${sets[@]}" --steps 3 --run-dir straight -q >/dev/null 2>&1 ||
    fail "the uninterrupted run failed"
  cmp -s resumed/checkpoint-step3.safetensors straight/checkpoint-step3.safetensors ||
    fail "resumed from $ckpt, step 3's checkpoint differs from the uninterrupted run's"
fi

# SIGTERM during the evaluation after a step (eval.every 1, a step an epoch, a test set of
# a million samples: the evaluation takes seconds, the step milliseconds): the evaluation
# is abandoned, the step checkpointed and logged without a test result.
eval_sets=(--set data.synthetic_train=32 --set data.synthetic_test=1000000 --set eval.every=1)
start 0.2 "${eval_sets[@]}" --epochs 1000 --run-dir in-eval
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || fail "in evaluation: exit $rc, want 130; stderr: $(cat err)"
grep -qF "the evaluation after step 1 was stopped; the checkpoint holds step 1" err ||
  fail "in evaluation: $(tr '\r' '\n' <err | tail -3)"
[ -f in-eval/checkpoint-step1.safetensors ] || fail "in evaluation: no checkpoint of step 1"
grep -q '"test"' in-eval/metrics.jsonl && fail "in evaluation: a test result was logged"
# A stop not over by POPKIT_STOP_NOTICE_SECONDS (1 by default; 0 here, so that every
# stop is) is said at once, with the way out; a second signal of the other kind ends the
# run by its default action, without waiting for the checkpoint.
notice() {
  POPKIT_STOP_NOTICE_SECONDS=0 start 0.02 "${sets[@]}" --steps 1000000 --run-dir "$1"
}
notice noticed
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || fail "notice: exit $rc, want 130; stderr: $(cat err)"
grep -qx "poprun: SIGTERM: stopping after the update in progress, if any, and the checkpoint; a second signal ends the run at once, keeping the checkpoints already written" err ||
  fail "notice: not said: $(tr '\r' '\n' <err | grep poprun:)"
notice twice
# The second comes 20 ms after the first (the clean stop takes 0.1-0.2 s at R 4096 here):
# two at once may reach two threads, each with its handler still in.
kill -INT "$pid"
sleep 0.02
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 143 ] || fail "SIGINT then SIGTERM: exit $rc, want 143 (ended by SIGTERM); stderr: $(tr '\r' '\n' <err | grep poprun:)"
finish "poprun SIGTERM within a step or an evaluation"
