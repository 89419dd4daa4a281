#!/usr/bin/env bash
# Reproduces the table of PopXL's remote-variables tutorial on this machine: the
# off-chip-optimizer example (4 replicas, optimizer state in streaming memory) trained
# five ways, then one `popreport compare` call. Each case is a --set override of
# examples/mnist_offchip_optimizer.yaml:
#   no sharding            optimizer state remote, whole on every replica
#   only fc1.weight state  threshold 401,408 = fc1.weight's elements: only its state sharded
#   all weight state       threshold 5,120 = fc4.weight's elements: every weight's state sharded
#   all state              threshold 1: the biases' state sharded too
#   on-chip                optimizer state on device, nothing sharded
# usage: remote_variables_tutorial.sh [BIN_DIR] [STEPS]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$root/build/release/cli}
steps=${2:-100}
config=$root/examples/mnist_offchip_optimizer.yaml
out=${POPKIT_RUNS_DIR:-$root/runs}/remote-variables
mkdir -p "$out"

cases=(no-sharding fc1-weight-state all-weight-state all-state on-chip)
overrides=(
  "--set sharding.enabled=false"
  "--set sharding.threshold=401408"
  "--set sharding.threshold=5120"
  "--set sharding.threshold=1"
  "--set remote.optimizer_state=false --set sharding.enabled=false"
)
files=()
for i in "${!cases[@]}"; do
  name=${cases[$i]}
  printf '[tutorial] %s: poprun train --steps %s %s\n' "$name" "$steps" "${overrides[$i]}"
  # shellcheck disable=SC2086  # the overrides are several words on purpose
  "$bin/poprun" train "$config" --steps "$steps" --quiet ${overrides[$i]} \
    --out "$out/$name/run.json" --force >/dev/null
  files+=("$out/$name/run.json")
done
names=$(IFS=,; echo "${cases[*]}")
"$bin/popreport" compare "${files[@]}" --names "$names" --baseline no-sharding "${@:3}"
