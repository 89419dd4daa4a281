#!/usr/bin/env bash
# A failure on any rank stops every rank within seconds, prints the error once with its
# rank, and exits non-zero; nothing hangs (each run has 60 s, far more than it needs).
# Ranks that disagree on what decides the run, and starts the ranks cannot make, are
# invalid input (exit 2) and leave nothing behind; the launcher passes mpirun's own
# failures on.
#   failure_test.sh SHIM  (SHIM: thread_single.cpp's library, an MPI without threads)
set -uo pipefail
shim=$1
source "$POPKIT_SOURCE_DIR/tests/mpi/lib.sh"

# expect_once NAME WANT -- COMMAND...: exits non-zero within 60 s, and poprun printed one
# error, containing WANT.
expect_once() {
  local name=$1 want=$2
  shift 3
  local start=$SECONDS
  timeout 60 "$@" >"$name.out" 2>"$name.err"
  local rc=$? took=$((SECONDS - start))
  echo "$rc" >"$name.rc"
  local errors
  errors=$(grep -c '^poprun[a-z ]*: error:' "$name.err")
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then
    fail "$name: exit code $rc (0 = not stopped, 124 = hung); stderr: $(cat "$name.err")"
  elif [ "$errors" != 1 ]; then
    fail "$name: $errors error lines, want 1: $(grep '^poprun[a-z ]*: error:' "$name.err")"
  elif ! grep -q "^poprun[a-z ]*: error: .*$want" "$name.err"; then
    fail "$name: the error is '$(grep '^poprun[a-z ]*: error:' "$name.err")', want it to contain '$want'"
  else
    echo "$name: exit $rc after ${took} s: $(grep '^poprun[a-z ]*: error:' "$name.err")"
  fi
}

# A missing data file on rank 1 only (its data folder is elsewhere).
expect_once missing_data "rank 1: MNIST not found" -- \
  "${mpirun[@]}" -np 1 poprun train "$config" --steps 2 -q -o a/run.json \
  : -np 1 -x POPKIT_DATA_DIR="$tmp/nowhere" poprun train "$config" --steps 2 -q -o a/run.json

# An MPI library without thread support (MPI_THREAD_SINGLE) is refused as MPI starts,
# naming both levels. Preloaded before a sanitized poprun's runtime, hence the option.
expect_once thread_level \
  "provides the thread level MPI_THREAD_SINGLE, but poprun needs MPI_THREAD_FUNNELED" -- \
  env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
  "${mpirun[@]}" -np 1 -x LD_PRELOAD="$shim" poprun train "$config" "${synthetic[@]}" \
  --steps 2 -q -o t/run.json

# A bad checkpoint, on every rank: rank 0 alone reports it.
echo "not a checkpoint" >bad.safetensors
expect_once bad_checkpoint "rank 0: bad.safetensors: truncated or not safetensors" -- \
  "${mpirun[@]}" -np 2 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o b/run.json \
  --resume bad.safetensors

[ "$(cat bad_checkpoint.rc)" = 2 ] || fail "bad checkpoint: exit $(cat bad_checkpoint.rc), want 2"

# The checkpoint resumed is missing on rank 1 alone (it runs in another folder): refused
# input on every rank (exit 2), said once, by rank 1.
mkdir elsewhere
poprun train "$config" "${synthetic[@]}" --steps 1 -q -o k/run.json >k.log 2>&1 || fail "k: $(cat k.log)"
expect_once rank1_checkpoint "rank 1: k/checkpoint-step1.safetensors: no such file" -- \
  "${mpirun[@]}" -np 1 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o m/run.json \
  --resume k/checkpoint-step1.safetensors \
  : -np 1 -wdir "$tmp/elsewhere" poprun train "$config" "${synthetic[@]}" --steps 2 -q -o m/run.json \
  --resume k/checkpoint-step1.safetensors
[ "$(cat rank1_checkpoint.rc)" = 2 ] || fail "checkpoint missing on rank 1: exit $(cat rank1_checkpoint.rc), want 2"

# Ranks that disagree on the config are refused before they start, naming the key (it
# was named by hash only).
expect_once different_configs "the config of rank 1 differs from rank 0's in training.optimizer.lr (0.0003 on rank 0, 0.1 on rank 1)" -- \
  "${mpirun[@]}" -np 1 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o c/run.json \
  : -np 1 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o c/run.json \
  --set training.optimizer.lr=0.1

# Ranks started with different command lines stop before step 1 (exit 2 on every rank,
# within seconds), naming the setting that differs: --steps (they hung), and
# --checkpoint-every (an internal assertion).
expect_once different_steps "the ranks disagree on the command line: --steps is 2 on rank 0 and 3 on rank 1" -- \
  "${mpirun[@]}" -np 1 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o e/run.json \
  : -np 1 poprun train "$config" "${synthetic[@]}" --steps 3 -q -o e/run.json
expect_once different_every "the ranks disagree on the command line: --checkpoint-every is not given on rank 0 and 2 on rank 1" -- \
  "${mpirun[@]}" -np 1 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o e/run.json \
  : -np 1 poprun train "$config" "${synthetic[@]}" --steps 2 -q -o e/run.json --checkpoint-every 2
for name in different_steps different_every; do
  [ "$(cat $name.rc)" = 2 ] || fail "$name: exit $(cat $name.rc), want 2"
done
[ ! -e e ] || fail "ranks that disagree left e/: $(ls -a e)"

# A rank count that does not divide the replicas is invalid input (exit 2); so is a
# pipelined plan over ranks, which leaves no run folder and no latest behind.
expect_once indivisible "replication.factor 2 cannot be spread over 3 ranks" -- \
  poprun train "$config" "${synthetic[@]}" --steps 2 -q --processes 3
[ "$(cat indivisible.rc)" = 2 ] || fail "indivisible: exit $(cat indivisible.rc), want 2"
pipelined=$POPKIT_SOURCE_DIR/examples/mnist_pipelined.yaml
expect_once pipelined "is pipelined (3 stages): its stage workers run as threads of one process, not over 2 ranks" -- \
  poprun train "$pipelined" "${synthetic[@]}" --steps 2 -q --processes 2
[ "$(cat pipelined.rc)" = 2 ] || fail "pipelined over ranks: exit $(cat pipelined.rc), want 2"
# The rank's error shows once: OpenMPI's boxes that repeat it are not passed on.
grep -q "non-zero status\|terminated normally" pipelined.err && fail "OpenMPI's boxes passed on: $(cat pipelined.err)"
[ ! -e runs ] || fail "a refused start left $(find runs)"

# The launcher's own failures: a hostfile it cannot read (exit 2, said by poprun), and a
# host mpirun cannot reach (mpirun's message passed on, exit 1, no made-up signal).
expect_once no_hostfile "--hostfile /nonexistent: No such file or directory" -- \
  poprun train "$config" "${synthetic[@]}" --steps 2 -q --processes 2 --hostfile /nonexistent
[ "$(cat no_hostfile.rc)" = 2 ] || fail "no hostfile: exit $(cat no_hostfile.rc), want 2"
echo "nosuchhost.invalid slots=2" >unreachable
expect_once unreachable "mpirun could not run the ranks (exit code" -- \
  poprun train "$config" "${synthetic[@]}" --steps 2 -q --processes 2 --hostfile unreachable
[ "$(cat unreachable.rc)" = 1 ] || fail "unreachable host: exit $(cat unreachable.rc), want 1"
grep -q "signal" unreachable.err && fail "unreachable host named a signal: $(cat unreachable.err)"
[ "$(grep -vc '^poprun[a-z ]*: error:' unreachable.err)" -ge 1 ] || fail "unreachable host: mpirun's own message was not passed on: $(cat unreachable.err)"

# A failure in the middle of training on rank 0 (writing a checkpoint whose path a folder
# took after the run began), while rank 1 waits for it in the next step's collectives.
mkdir d
"${mpirun[@]}" -np 2 poprun train "$config" "${synthetic[@]}" --steps 100000 -q -o d/run.json \
  --checkpoint-every 50 >d.out 2>d.err &
pid=$!
for _ in $(seq 600); do [ -e d/checkpoint-step50.safetensors ] && break; sleep 0.1; done
mkdir d/checkpoint-step250.safetensors
start=$SECONDS
wait $pid
rc=$?
errors=$(grep -c '^poprun[a-z ]*: error:' d.err)
if [ "$rc" = 0 ] || [ "$errors" != 1 ] || ! grep -q '^poprun[a-z ]*: error: rank 0: .*checkpoint-step250' d.err; then
  fail "mid-run failure: exit $rc, $errors error lines: $(cat d.err)"
else
  echo "mid_run: exit $rc $((SECONDS - start)) s after step 50: $(grep '^poprun[a-z ]*: error:' d.err)"
fi
finish mpi.failure
