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

# The launcher's mpirun command: its own options out, the rest of the command as typed.
printf '#!/bin/sh\necho "$@"\n' >show-args && chmod +x show-args
echo "localhost slots=4" >hosts
got=$(POPKIT_MPIRUN=./show-args poprun train "$config" --processes=4 --steps 3 --hostfile hosts -q)
want="-np 4 --hostfile hosts --stdin none $(readlink -f "$(command -v poprun)") train $config --steps 3 -q"
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
poprun: error: mpirun could not run the ranks (exit code 3); its message is above"
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
  elif ! grep -q "stopped by SIGUSR1 at step [0-9]*: checkpoint written to .*${last##*/}" \
    "launcher-$signal.err"; then
    fail "SIG$signal to poprun --processes 2: no checkpoint at the stop (last: $last): $(cat "launcher-$signal.err")"
  else
    echo "SIG$signal to poprun --processes 2: exit 130, checkpoint $last"
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
