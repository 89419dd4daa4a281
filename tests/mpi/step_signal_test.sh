#!/usr/bin/env bash
# A signal during a step over ranks (`poprun train --processes 2`, examples/quick.yaml at
# 512 replicas: a collective moves 131,072 pieces between the ranks, in one message each
# way, and a step takes about 0.15 s here): the ranks agree before each collective
# and before the update whether any was asked to stop, and then every rank abandons the
# step (docs/multi-host.md, "Stopping cleanly"); a signal after the update began lets
# the step finish. Either way rank 0 checkpoints the last step taken, the exit code is
# 130, the checkpoint is the uninterrupted run's of that step byte for byte, and the run
# resumed from it ends bitwise as the uninterrupted one. At least one of the signals
# must abandon a step. Prints a row per signal: its delay after step 1, the seconds to
# the exit, and what poprun said.
set -uo pipefail
source "$POPKIT_SOURCE_DIR/tests/mpi/lib.sh"
quick=$POPKIT_SOURCE_DIR/examples/quick.yaml
replicas=512
args=(--set replication.factor=$replicas --set data.synthetic_train=$((replicas * 32))
  --set data.synthetic_test=$((replicas * 8)))
# stopped DIR DELAY: a run signalled DELAY s after it reports step 1; sets step (the one
# its checkpoint holds, empty when it failed) and counts the abandoned steps.
abandoned=0
stopped() {
  local dir=$1 delay=$2
  poprun train "$quick" "${args[@]}" --steps 100000 --processes 2 -o "$dir/run.json" \
    >"$dir.out" 2>"$dir.err" &
  local pid=$!
  for _ in $(seq 1200); do
    grep -q "step 1/" "$dir.err" 2>/dev/null && break
    sleep 0.05
  done
  sleep "$delay"
  local sent took rc said abandon
  sent=$(date +%s.%N)
  kill -TERM "$pid"
  timeout 120 tail -s 0.05 --pid="$pid" -f /dev/null
  took=$(awk -v a="$sent" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  wait "$pid"
  rc=$?
  said=$(grep -m1 -o "stopped by the launcher at step [0-9]*" "$dir.err")
  abandon=$(grep -m1 -o "step [0-9]* stopped before its update" "$dir.err")
  echo "signal $delay s after step 1: exit $rc after $took s, $said${abandon:+ ($abandon)}"
  [ -n "$abandon" ] && abandoned=$((abandoned + 1))
  step=$(grep -o "[0-9]*$" <<<"$said")
  if [ "$rc" != 130 ]; then
    fail "signal $delay s after step 1: exit $rc, want 130: $(cat "$dir.err")"
    step=
  elif [ -z "$step" ]; then
    fail "signal $delay s after step 1: no 'stopped by the launcher at step N': $(cat "$dir.err")"
  fi
}

# About half the signals land before the update: signals until one abandoned a step,
# three at least and twelve at most.
delays=()
steps=()
last=0
for try in $(seq 12); do
  [ "$try" -gt 3 ] && [ "$abandoned" -gt 0 ] && break
  delay=$(awk -v t="$try" 'BEGIN { printf "%.2f", (t * 0.37) % 1 }')
  stopped "stop-$try" "$delay"
  delays+=("$delay")
  steps+=("$step")
  [ -n "$step" ] && [ "$step" -gt "$last" ] && last=$step
done
# The uninterrupted run, past the last step a stopped run reached.
end=$((last + 2))
poprun train "$quick" "${args[@]}" --steps $end --checkpoint-every 1 --processes 2 -q \
  -o whole/run.json >whole.log 2>&1 || fail "the uninterrupted run: $(cat whole.log)"
# Its files record the command as given, the launcher's --processes 2 included (the
# ranks run without it).
grep -qE -- "^# command: poprun train .* --processes 2 -q -o whole/run.json$" whole/config.yaml ||
  fail "config.yaml of a run over ranks: $(grep '^# command' whole/config.yaml)"
for i in "${!steps[@]}"; do
  dir=stop-$((i + 1)) step=${steps[$i]}
  [ -n "$step" ] || continue
  if ! cmp -s "$dir/checkpoint-step$step.safetensors" "whole/checkpoint-step$step.safetensors"; then
    fail "$dir: the checkpoint of step $step differs from the uninterrupted run's"
  elif ! poprun train "$quick" "${args[@]}" --steps $end --processes 2 -q \
    --resume "$dir/checkpoint-step$step.safetensors" -o "$dir-resumed/run.json" \
    >"$dir-resumed.log" 2>&1; then
    fail "$dir: resume from step $step: $(cat "$dir-resumed.log")"
  elif ! cmp -s "$dir-resumed/checkpoint-step$end.safetensors" "whole/checkpoint-step$end.safetensors"; then
    fail "$dir: resumed from step $step, the checkpoint of step $end differs from the uninterrupted run's"
  fi
done
[ "$abandoned" -gt 0 ] || fail "no signal abandoned a step over ranks"
finish mpi.step_signal
