#!/usr/bin/env bash
# The host memory a run needs: poprun refuses a run this machine cannot hold before it
# allocates anything (exit 2, the bytes named); POPKIT_HOST_MEMORY sets what it assumes
# the machine has; an allocation that fails anyway is a clear error, not std::bad_alloc.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"
mnist="$POPKIT_SOURCE_DIR/examples/mnist.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1


# A small run on a machine said to have 4 MiB: refused, with every part named.
expect 2 "poprun train: error: the run needs 13.07 MiB of host memory (datasets 3.11 MiB, streaming memory 87.31 KiB, device memory 56.50 KiB, host buffers 831.90 KiB, overhead 9.00 MiB) but this machine has 4.00 MiB available (POPKIT_HOST_MEMORY); POPKIT_HOST_MEMORY=SIZE overrides what poprun takes as available" \
  -- env POPKIT_HOST_MEMORY=4MiB poprun train "$config" --steps 1 --out a/run.json \
  --set data.synthetic_train=50000
[ ! -e a ] || fail "a refused run made its folder: $(find a)"
POPKIT_HOST_MEMORY=25MiB poprun train "$config" --steps 1 --out b/run.json -q \
  --set data.synthetic_train=50000 >/dev/null 2>b.err || fail "25 MiB refused: $(cat b.err)"

# The cases: 100 million MNIST-sized images, and 10^10-pixel images on a
# device said to be huge. Refused at once, long before anything is allocated.
expect 2 "poprun train: error: the run needs 74.65 GiB of host memory (datasets 73.11 GiB, streaming memory 17.32 MiB, device memory 12.46 MiB, host buffers 1.50 GiB, overhead 9.00 MiB) but this machine has 64.00 GiB available (POPKIT_HOST_MEMORY)" \
  -- env POPKIT_HOST_MEMORY=64GiB poprun train "$mnist" --steps 1 --out c/run.json \
  --set data.dataset=synthetic --set data.synthetic_train=100000000
expect 2 "TiB of host memory (datasets " \
  -- poprun train "$config" --steps 1 --out d/run.json \
  --set "model.input_shape=[100000, 100000]" --set device.memory_per_replica=8TiB
# Evaluation counts only the test set: refused the same way.
poprun train "$config" --steps 1 --out e/run.json -q >/dev/null 2>&1 || fail "train e/"
expect 2 "poprun eval: error: the run needs " \
  -- env POPKIT_HOST_MEMORY=1MiB poprun eval "$config" --checkpoint e/checkpoint-step1.safetensors

# What the machine has must be a byte size.
expect 1 "poprun train: error: POPKIT_HOST_MEMORY: 'lots' is not a byte size" \
  -- env POPKIT_HOST_MEMORY=lots poprun train "$config" --steps 1 --out f/run.json

# The last resort: an estimate overridden, an address space too small for the data.
# (Not under a sanitizer: its shadow memory needs more address space than the limit.)
[ -n "${POPKIT_SANITIZE:-}" ] || expect 1 "poprun train: error: out of host memory: an allocation failed (std::bad_alloc); make the run smaller (datasets, model, replication.factor) or use a machine with more memory" \
  -- bash -c "ulimit -v 3000000 && POPKIT_HOST_MEMORY=1024TiB exec poprun train '$mnist' \
     --steps 1 --out g/run.json --set data.dataset=synthetic --set data.synthetic_train=100000000"

finish "poprun host memory"
