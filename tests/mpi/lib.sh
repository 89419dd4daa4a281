# What the MPI test scripts share (sourced after `set -uo pipefail`): tests/cli/lib.sh's
# fail and finish, the mpirun command line, a scratch folder to run in, a small
# synthetic run of examples/mnist.yaml, and train and same_run, which run poprun train and
# compare two runs. As root OpenMPI refuses to start without the two variables; on a
# machine with fewer cores than ranks it needs --oversubscribe.
source "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
config=$POPKIT_SOURCE_DIR/examples/mnist.yaml
synthetic=(--set data.dataset=synthetic --set data.synthetic_train=1024 --set data.synthetic_test=256)

# same_run DIR_A DIR_B STEP: the checkpoints of step STEP are the same bytes, the losses
# the same numbers.
same_run() {
  if ! cmp -s "$1/checkpoint-step$3.safetensors" "$2/checkpoint-step$3.safetensors"; then
    fail "$2: checkpoint of step $3 differs from $1's"
    return
  fi
  /usr/bin/python3 - "$1/run.json" "$2/run.json" <<'PY' || fail "$2: losses differ from $1's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["loss"] == b["loss"], (a["loss"], b["loss"])
assert a["test"] == b["test"], (a["test"], b["test"])
PY
}

train() {  # train DIR [mpirun -np N] -- ARGS...
  local dir=$1; shift
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  "${launcher[@]}" poprun train "$@" --quiet --out "$dir/run.json" >"$dir.log" 2>&1 \
    || { fail "${launcher[*]} poprun train $* failed:"; cat "$dir.log"; return 1; }
}
