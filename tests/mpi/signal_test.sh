#!/usr/bin/env bash
# Signals to a run over ranks: every rank stops after the same step, rank 0 writes one
# checkpoint and the run resumes from it.
# - SIGINT or SIGTERM to `poprun train --processes 2` (the launcher, cli/launch.h): exit
#   130, as one process does.
# - SIGTERM to the ranks (as a scheduler such as Slurm signals a job's processes): mpirun
#   exits 130.
# - SIGTERM to mpirun itself: OpenMPI passes SIGTERM on to the ranks, gives them
#   odls_base_sigkill_timeout seconds, and exits 1 whatever they return (docs/multi-host.md,
#   "Stopping cleanly").
# - A signal during the ranks' set-up (4,096 replicas of examples/quick.yaml: seconds),
#   to the launcher, to the ranks, to rank 1 alone (which passes it on to the launcher)
#   or as SIGUSR1 to mpirun: every rank ends at once, exit 130, rank 0 saying so once,
#   with no run folder left and `latest` unchanged; so does a signal to the launcher as
#   it starts mpirun.
set -uo pipefail
source "$POPKIT_SOURCE_DIR/tests/mpi/lib.sh"

# stop DIR TARGET [MPIRUN OPTIONS]: starts a long run, waits for its first checkpoint, sends
# SIGTERM to TARGET (ranks | mpirun), or SIGINT/SIGTERM to the launcher (launcher-INT,
# launcher-TERM); sets rc.
stop() {
  local dir=$1 target=$2
  shift 2
  local run=(poprun train "$config" "${synthetic[@]}" --steps 100000 --checkpoint-every 20
    -o "$dir/run.json")
  case $target in
    launcher-*) "${run[@]}" --processes 2 >"$dir.out" 2>"$dir.err" & ;;
    *) "${mpirun[@]}" "$@" -np 2 "${run[@]}" >"$dir.out" 2>"$dir.err" & ;;
  esac
  local pid=$!
  for _ in $(seq 600); do [ -e "$dir/checkpoint-step20.safetensors" ] && break; sleep 0.1; done
  case $target in
    ranks) pkill -TERM -P "$pid" -x poprun ;;
    launcher-*) kill -"${target#launcher-}" "$pid" ;;
    *) kill -TERM "$pid" ;;
  esac
  timeout 60 tail --pid="$pid" -f /dev/null
  wait "$pid"
  rc=$?
}

# The launcher's mpirun command: its own options out, the rest of the command as typed,
# and the whole command for the ranks to record.
printf '#!/bin/sh\necho "$@"\n' >show-args && chmod +x show-args
echo "localhost slots=4" >hosts
got=$(POPKIT_MPIRUN=./show-args poprun train "$config" --processes=4 --steps 3 --hostfile hosts -q |
  sed 's/POPKIT_LAUNCHER_PID=[0-9][0-9]* /POPKIT_LAUNCHER_PID=PID /')
given=$(printf 'train\x1f%s\x1f--processes=4\x1f--steps\x1f3\x1f--hostfile\x1fhosts\x1f-q' "$config")
want="-np 4 --hostfile hosts --stdin none --mca odls_base_sigkill_timeout 0 -x POPKIT_LAUNCH_ARGUMENTS=$given -x POPKIT_LAUNCHER_PID=PID $(readlink -f "$(command -v poprun)") train $config --steps 3 -q"
[ "$got" = "$want" ] || fail "poprun --processes=4 --hostfile hosts ran
  $got
want
  $want"

# What the launcher passes on of mpirun's error stream: its own messages and boxes, not
# OpenMPI's boxes that repeat a rank's error; an exit code of mpirun's own (not 0, 1, 2,
# 130, nor a signal's) is a failure that says so.
cat >fake-mpirun <<'SH'
#!/bin/sh
border=--------------------------------------------------------------------------
printf '%s\n' "mpirun: cannot reach host h1" "$border" "ORTE was unable to start a daemon." "$border" >&2
printf '%s\n' "$border" "Primary job  terminated normally, but 1 process returned" "$border" >&2
printf '%s\n' "[h1:42] 1 more process has sent help message help-mpi-api.txt / mpi-abort" >&2
exit 3
SH
chmod +x fake-mpirun
POPKIT_MPIRUN=./fake-mpirun poprun train "$config" --processes 2 -q 2>fake.err
rc=$?
want="mpirun: cannot reach host h1
--------------------------------------------------------------------------
ORTE was unable to start a daemon.
--------------------------------------------------------------------------
poprun train: error: mpirun could not run the ranks (exit code 3); its message is above"
[ "$rc" = 1 ] && [ "$(cat fake.err)" = "$want" ] || fail "mpirun's stream: exit $rc, stderr
$(cat fake.err)
want
$want"

# last_checkpoint DIR: the checkpoint of the highest step
last_checkpoint() { ls "$1"/checkpoint-step*.safetensors | sort -V | tail -1; }

stop ranks ranks
last=$(last_checkpoint ranks)
if [ "$rc" != 130 ]; then
  fail "SIGTERM to the ranks: mpirun exited $rc, want 130: $(cat ranks.err)"
elif [ "$last" = ranks/checkpoint-step20.safetensors ] && ! grep -q "stopped by SIGTERM" ranks.err; then
  fail "SIGTERM to the ranks: no checkpoint at the stop: $(cat ranks.err)"
else
  echo "SIGTERM to the ranks: exit 130, $(grep -o 'stopped by SIGTERM at step [0-9]*' ranks.err)"
  # The run resumes from it, in one process.
  poprun train "$config" "${synthetic[@]}" --resume "$last" --steps $(( $(grep -o '[0-9]*' <<<"${last##*step}") + 2 )) \
    -q -o resumed/run.json >resumed.log 2>&1 || fail "resume from $last: $(cat resumed.log)"
fi

for signal in INT TERM; do
  stop "launcher-$signal" "launcher-$signal"
  last=$(last_checkpoint "launcher-$signal")
  if [ "$rc" != 130 ]; then
    fail "SIG$signal to poprun --processes 2: exit $rc, want 130: $(cat "launcher-$signal.err")"
  elif ! grep -q "stopped by the launcher at step [0-9]*: checkpoint written to .*${last##*/}" \
    "launcher-$signal.err"; then
    fail "SIG$signal to poprun --processes 2: no checkpoint at the stop (last: $last): $(cat "launcher-$signal.err")"
  elif ! grep -q "^poprun: SIG$signal: stopping the ranks" "launcher-$signal.err"; then
    fail "SIG$signal to poprun --processes 2: the launcher does not name the signal: $(cat "launcher-$signal.err")"
  else
    echo "SIG$signal to poprun --processes 2: exit 130, checkpoint $last"
  fi
done

# stop_setup TARGET: a run of 4,096 replicas (2,048 a rank) in runs/quick/, signalled
# once rank 0 has made its folder, in the set-up; TARGET as stop's, or mpirun-USR1. The
# earlier run's folder and `latest` must be all that is left.
quick=$POPKIT_SOURCE_DIR/examples/quick.yaml
poprun train "$quick" --steps 1 -q >earlier.log 2>&1 || fail "the earlier run: $(cat earlier.log)"
earlier=$(readlink runs/quick/latest)
stop_setup() {
  local target=$1
  local run=(poprun train "$quick" --set replication.factor=4096 --set data.synthetic_train=131072
    --set data.synthetic_test=32768 --steps 1000000)
  case $target in
    launcher-* | rank1) "${run[@]}" --processes 2 >"setup-$target.out" 2>"setup-$target.err" & ;;
    *) "${mpirun[@]}" -np 2 "${run[@]}" >"setup-$target.out" 2>"setup-$target.err" & ;;
  esac
  local pid=$! made=
  for _ in $(seq 3000); do
    made=$(find runs/quick -mindepth 1 -maxdepth 1 -type d ! -name "$earlier" | head -1)
    [ -n "$made" ] && break
    sleep 0.01
  done
  [ -n "$made" ] || fail "set-up, $target: no run folder made within 30 s"
  local sent
  sent=$(date +%s.%N)
  case $target in
    ranks) pkill -TERM -P "$pid" -x poprun ;;
    launcher-*) kill -"${target#launcher-}" "$pid" ;;
    mpirun-USR1) kill -USR1 "$pid" ;;
    rank1) kill -TERM "$(rank_pid "$pid" 1)" ;;
  esac
  # A run that goes on to train (a step of 4,096 replicas over ranks takes minutes) is
  # ended after 20 s: the launcher aborts at a second signal, mpirun at SIGTERM.
  timeout 20 tail -s 0.05 --pid="$pid" -f /dev/null
  local took
  took=$(awk -v a="$sent" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    sleep 0.5
    kill -TERM "$pid" 2>/dev/null
  fi
  wait "$pid"
  local rc=$?
  local said left
  said=$(grep -c "^poprun: stopped by \(SIG[A-Z0-9]*\|the launcher\) during set-up" "setup-$target.err")
  left=$(find runs/quick -mindepth 1 -maxdepth 1 ! -name "$earlier" ! -name latest)
  if [ "$rc" != 130 ]; then
    fail "set-up, $target: exit $rc, want 130: $(cat "setup-$target.err")"
  elif [ "$said" != 1 ]; then
    fail "set-up, $target: said it stopped during set-up $said times, want once: $(cat "setup-$target.err")"
  elif awk -v t="$took" 'BEGIN { exit !(t >= 10) }'; then
    fail "set-up, $target: the job ended $took s after the signal"
  elif [ -n "$left" ] || [ "$(readlink runs/quick/latest)" != "$earlier" ]; then
    fail "set-up, $target: left $left; latest -> $(readlink runs/quick/latest), was $earlier"
  elif [ "$target" = rank1 ] && ! grep -q "^poprun: a rank was signalled: stopping the ranks" "setup-$target.err"; then
    fail "set-up, $target: the launcher does not say a rank was signalled: $(cat "setup-$target.err")"
  else
    echo "set-up, $target: exit 130 after $took s, nothing left"
  fi
}
# rank_pid LAUNCHER N: the pid of rank N, a grandchild of the launcher (mpirun's child),
# looked for during up to 10 s.
rank_pid() {
  local p parent
  for _ in $(seq 1000); do
    for p in $(pgrep -x poprun); do
      parent=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
      [ -n "$parent" ] && [ "$(awk '/^PPid:/ { print $2 }' "/proc/$parent/status" 2>/dev/null)" = "$1" ] ||
        continue
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
        echo "$p"
        return
      fi
    done
    sleep 0.01
  done
  echo "no rank $2 under launcher $1: $(ps -o pid,ppid,comm --forest -g "$(ps -o sid= -p "$1")")" >&2
}
for target in launcher-INT launcher-TERM ranks rank1 mpirun-USR1; do stop_setup "$target"; done

# A stop in the launcher's first moments, before or while mpirun starts the ranks: mpirun
# drops a SIGUSR1 that comes before its ranks run, and a rank's own start-up would end on
# one, so the launcher repeats it and the ranks hold it until their handler is in (it
# was lost, exit 0, or ended a rank, exit 1). Exit 130 and nothing left, whenever it comes.
# The delays count from when the launcher has its SIGTERM handler in (/proc/PID/status,
# SigCgt): before that, as in any process, SIGTERM ends it (a sanitized build takes 0.1 s
# to reach main()).
for delay in 0.1 0.3 0.6 1.2; do
  poprun train "$quick" --set replication.factor=4096 --set data.synthetic_train=131072 \
    --set data.synthetic_test=32768 --steps 1000000 --processes 2 >early.out 2>early.err &
  pid=$!
  for _ in $(seq 1000); do
    caught=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    [ -n "$caught" ] && (((16#$caught >> 14) & 1)) && break
    sleep 0.005
  done
  sleep "$delay"
  kill -TERM "$pid"
  timeout 30 tail -s 0.05 --pid="$pid" -f /dev/null
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    sleep 0.5
    kill -TERM "$pid" 2>/dev/null
  fi
  wait "$pid"
  rc=$?
  left=$(find runs/quick -mindepth 1 -maxdepth 1 ! -name "$earlier" ! -name latest)
  if [ "$rc" != 130 ]; then
    fail "SIGTERM $delay s after the launcher's start: exit $rc, want 130: $(cat early.err)"
  elif [ -n "$left" ] && ! ls "$left"/checkpoint-step*.safetensors >/dev/null 2>&1; then
    # A set-up that ended before the signal (a fast machine) leaves a run stopped at a
    # step, with its checkpoint; one stopped earlier leaves nothing.
    fail "SIGTERM $delay s after the launcher's start: left $left without a checkpoint"
  elif [ -z "$left" ] && [ "$(readlink runs/quick/latest)" != "$earlier" ]; then
    fail "SIGTERM $delay s after the launcher's start: latest moved to $(readlink runs/quick/latest)"
  elif [ "$(grep -c 'Forwarding signal' early.err)" -gt 1 ]; then
    fail "SIGTERM $delay s after the launcher's start: mpirun's forwarding said more than once: $(cat early.err)"
  else
    echo "SIGTERM $delay s after the launcher's start: exit 130, ${left:-nothing} left"
  fi
  if [ -n "$left" ]; then
    rm -rf "$left"
    ln -sfn "$earlier" runs/quick/latest
  fi
done

stop mpirun mpirun --mca odls_base_sigkill_timeout 5
last=$(last_checkpoint mpirun)
if [ "$rc" = 0 ]; then
  fail "SIGTERM to mpirun: exit 0"
elif [ "$last" = mpirun/checkpoint-step20.safetensors ]; then
  fail "SIGTERM to mpirun: no checkpoint written at the stop (last: $last)"
else
  echo "SIGTERM to mpirun: exit $rc (OpenMPI's), checkpoint $last"
fi
finish mpi.signal
