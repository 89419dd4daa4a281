#!/usr/bin/env bash
# The GPT kinds across processes (issue 38 item 3): tests/data/gpt/gpt_small.yaml (R 4,
# a head tied to the embedding, dropout) trained under mpirun -np 1, 2 and 4 writes a
# checkpoint byte for byte equal to one process's, with the same losses and evaluation;
# so does the model untied, phased, remote and sharded (a tied head is refused phased),
# and in groups that span the ranks; and 2 steps on 2 ranks resumed in one process end
# on the whole run's checkpoint.
set -uo pipefail
source "$POPKIT_SOURCE_DIR/tests/mpi/lib.sh"

steps=4
gpt=("$POPKIT_SOURCE_DIR/tests/data/gpt/gpt_small.yaml"
     --set "data.dir=$POPKIT_SOURCE_DIR/tests/data/gpt")
untied_phased=(--set "model.layers.4.tied_to=''" --set execution.mode=phased
               --set remote.weights=true --set remote.optimizer_state=true
               --set sharding.enabled=true --set sharding.threshold=2048)

# say WHAT BEFORE: prints WHAT when no check failed since the count was BEFORE.
say() { [ "$failures" = "$2" ] && echo "$1"; }

before=$failures
args=("${gpt[@]}" --steps $steps)
if train tied.single -- "${args[@]}"; then
  for n in 1 2 4; do
    train tied.np$n "${mpirun[@]}" -np $n -- "${args[@]}" && same_run tied.single tied.np$n $steps
  done
fi
say "tied, standard: bitwise under mpirun -np 1, 2, 4" $before

before=$failures
args=("${gpt[@]}" "${untied_phased[@]}" --steps $steps)
train untied.single -- "${args[@]}" && train untied.np2 "${mpirun[@]}" -np 2 -- "${args[@]}" \
  && same_run untied.single untied.np2 $steps
say "untied, phased remote sharded: bitwise under mpirun -np 2" $before

# Groups across ranks: R 4, variables in groups {0, 2} and {1, 3} (stride 2) sharded
# within them, on 2 ranks of 2 replicas: every collective has a member on each rank.
before=$failures
args=("${gpt[@]}" --set replication.groupings.everyone.group_size=2
      --set replication.groupings.everyone.stride=2 --set sharding.enabled=true
      --set sharding.threshold=2048 --steps $steps)
train strided.single -- "${args[@]}" && train strided.np2 "${mpirun[@]}" -np 2 -- "${args[@]}" \
  && same_run strided.single strided.np2 $steps
say "groups across ranks, sharded: bitwise under mpirun -np 2" $before

before=$failures
train resume.first "${mpirun[@]}" -np 2 -- "${gpt[@]}" --steps 2 \
  && train resume.second -- "${gpt[@]}" --steps $steps \
       --resume resume.first/checkpoint-step2.safetensors \
  && same_run tied.single resume.second $steps
say "resume from 2 ranks in 1 process: bitwise" $before
finish mpi.gpt
