#!/usr/bin/env bash
# Replicas across processes (mpirun, engine/runtime/world.h): every example config trained
# under mpirun -np 1, 2 and 4 (where the ranks divide its replication factor) writes a
# checkpoint byte for byte equal to the single-process run's, with the same losses; a
# grouping whose groups span ranks does too; a resume under another number of ranks
# continues bitwise; eval prints the same result; and the bytes the MPI backend counted
# between ranks equal the plan's.
set -uo pipefail
source "$POPKIT_SOURCE_DIR/tests/mpi/lib.sh"

steps=4
for example in "$POPKIT_SOURCE_DIR"/examples/*.yaml; do
  name=$(basename "$example" .yaml)
  [[ $name == gpt2_* ]] && continue  # planned for IPUs, TiBs of host memory to train here
  # A language model reads its text (a synthetic set has no tokens).
  data=("${synthetic[@]}")
  grep -q "dataset: text" "$example" && data=()
  args=("$example" "${data[@]}" --steps $steps)
  train "$name.single" -- "${args[@]}" || continue
  factor=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["replication_factor"])' "$name.single/run.json")
  # A pipelined plan's stage workers are threads of one process: mpirun -np 1 only (more
  # ranks are refused, which mpi.failure's neighbours do not need to show again).
  pipelined=$(/usr/bin/python3 -c 'import json,sys; print("pipeline" in json.load(open(sys.argv[1])))' "$name.single/run.json")
  for n in 1 2 4; do
    [ $((factor % n)) = 0 ] || continue
    [ "$pipelined" = False ] || [ $n = 1 ] || continue
    train "$name.np$n" "${mpirun[@]}" -np $n -- "${args[@]}" || continue
    same_run "$name.single" "$name.np$n" $steps
  done
  echo "$name: R $factor, bitwise under mpirun -np 1, 2, 4 where they divide it"
done

# Groups across ranks: R 4, groups {0, 2} and {1, 3} (stride 2) on 2 ranks of 2 replicas,
# with sharding, so every collective has a member on each rank.
groups=(--set replication.factor=4 --set replication.groupings.everyone.group_size=2
        --set replication.groupings.everyone.stride=2)
args=("$config" "${synthetic[@]}" "${groups[@]}" --steps $steps)
train strided.single -- "${args[@]}" && train strided.np2 "${mpirun[@]}" -np 2 -- "${args[@]}" \
  && same_run strided.single strided.np2 $steps && echo "groups across ranks: bitwise"

# Resume under another number of ranks: 2 steps on 2 ranks, then 2 more in one process.
args=("$config" "${synthetic[@]}")
train resume.whole -- "${args[@]}" --steps 4 \
  && train resume.first "${mpirun[@]}" -np 2 -- "${args[@]}" --steps 2 \
  && train resume.second -- "${args[@]}" --steps 4 --resume resume.first/checkpoint-step2.safetensors \
  && cmp -s resume.whole/checkpoint-step4.safetensors resume.second/checkpoint-step4.safetensors \
  && echo "resume from 2 ranks in 1 process: bitwise" \
  || fail "resume from a 2-rank checkpoint in one process differs from the whole run"
# Its run file carries the 2-rank run's steps: the losses are the whole run's.
same_run resume.whole resume.second 4

# Run folders under mpirun: rank 0 alone makes runs/<name>/<stamp>/ and writes into it,
# every rank resumes from the checkpoint rank 0 found for --resume latest.
mkdir folders && cd folders || exit 1
"${mpirun[@]}" -np 2 poprun train "${args[@]}" --steps 3 -q 2>np2.err \
  && "${mpirun[@]}" -np 2 poprun train "${args[@]}" --steps 5 --resume latest -q 2>>np2.err \
  || fail "run folders on 2 ranks: $(cat np2.err)"
/usr/bin/python3 - runs/mnist-phased-rts <<'PY' || fail "run folders on 2 ranks: $(ls -R runs)"
import json, os, sys
base = sys.argv[1]
stamps = sorted(d for d in os.listdir(base) if d != "latest")
assert len(stamps) == 2, stamps  # one folder per run, not one per rank
assert os.readlink(f"{base}/latest") == stamps[1], os.readlink(f"{base}/latest")
run = json.load(open(f"{base}/{stamps[1]}/run.json"))
assert len(run["loss"]) == 5 and run["resumed_from"]["step"] == 3, run["resumed_from"]
rows = [json.loads(l) for l in open(f"{base}/{stamps[1]}/metrics.jsonl")]
assert [r["step"] for r in rows] == [4, 5], rows  # rank 0's lines alone
assert [r["loss"] for r in rows] == run["loss"][3:]
print(f"run folders on 2 ranks: {stamps}, the second resumed at step 3")
PY
cd .. || exit 1

# Eval on 2 ranks prints what one process prints (standard output: OpenMPI's own warnings,
# such as hwloc's in a root without /sys, go to standard error).
ckpt=resume.whole/checkpoint-step4.safetensors
one=$(poprun eval "${args[@]}" --checkpoint $ckpt 2>eval.one.err)
two=$("${mpirun[@]}" -np 2 poprun eval "${args[@]}" --checkpoint $ckpt 2>eval.two.err)
[ -n "$one" ] && [ "$one" = "$two" ] && echo "eval: $two" \
  || fail "eval on 2 ranks printed '$two' ($(cat eval.two.err)), one process '$one'"

# Bytes across ranks: with one replica per rank every collective byte crosses, and the
# backend's count equals the plan's collective bytes per replica per step; with two
# replicas per rank it equals the plan's cross-host bytes for 2 replicas per host.
popplan plan "$POPKIT_SOURCE_DIR/examples/mnist_offchip_optimizer.yaml" --replicas-per-host 2 \
  --format json -o offchip.plan.json >/dev/null || fail "popplan plan --replicas-per-host 2"
/usr/bin/python3 - mnist.np2/run.json mnist_offchip_optimizer.np2/run.json offchip.plan.json <<'PY' || fail "bytes across ranks"
import json, sys
run = json.load(open(sys.argv[1]))
p, planned = run["processes"], run["bytes_moved"]["planned"]["collective"]
assert p["ranks"] == 2 and p["replica_ranks"] == [0, 1], p
assert p["cross_process_bytes"] == planned > 0, (p["cross_process_bytes"], planned)
print(f"mnist on 2 ranks: {p['cross_process_bytes']} bytes per replica per step crossed ranks, "
      f"the plan's {planned}")
run = json.load(open(sys.argv[2]))  # R 4 on 2 ranks: replicas 0, 1 on rank 0
p = run["processes"]
assert p["replica_ranks"] == [0, 0, 1, 1], p
planned = json.load(open(sys.argv[3]))["network"]["cross_host_bytes"]
assert 0 < p["cross_process_bytes"] == planned < run["bytes_moved"]["measured"]["collective"], \
    (p["cross_process_bytes"], planned)
print(f"offchip on 2 ranks of 2 replicas: {p['cross_process_bytes']} of "
      f"{run['bytes_moved']['measured']['collective']} bytes per replica per step crossed ranks, "
      f"the plan's cross-host bytes {planned}")
PY
finish mpi.train
