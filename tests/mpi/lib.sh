# What the MPI test scripts share (sourced after `set -uo pipefail`): tests/cli/lib.sh's
# fail and finish, the mpirun command line, a scratch folder to run in, and a small
# synthetic run of examples/mnist.yaml. As root OpenMPI refuses to start without the two
# variables; on a machine with fewer cores than ranks it needs --oversubscribe.
source "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
config=$POPKIT_SOURCE_DIR/examples/mnist.yaml
synthetic=(--set data.dataset=synthetic --set data.synthetic_train=1024 --set data.synthetic_test=256)
