#!/usr/bin/env bash
# The host-memory check over ranks (planner/host_memory.h, ProcessShare): the ranks on
# one host together need each its share of the replicas beside OpenMPI's memory and what
# every rank holds whole (the datasets, the global batch), and rank 0 its run file. A run
# whose 2 ranks need more than the host has is refused at once (exit 2, one error, no
# folder) though one process holding every replica would fit, and one that fits runs.
set -uo pipefail
source "$POPKIT_SOURCE_DIR/tests/mpi/lib.sh"
quick=$POPKIT_SOURCE_DIR/examples/quick.yaml
run=(poprun train "$quick" --set replication.factor=4 --steps 2 -q)

# "12.5 MiB" -> bytes
to_bytes() {
  awk -v n="$1" -v u="$2" 'BEGIN {
    m["B"] = 1; m["KiB"] = 1024; m["MiB"] = 1048576; m["GiB"] = 1073741824
    printf "%.0f", n * m[u] }'
}

# One process holding all 4 replicas: the figure each rank was checked by before.
one=$(POPKIT_HOST_MEMORY=1 "${run[@]}" --run-dir one 2>&1 |
  sed -nE 's/.*the run needs ([0-9.]+) ([KMG]?i?B) of host memory.*/\1 \2/p')
[ -n "$one" ] || {
  fail "one process: no estimate in its refusal"
  finish
}
# shellcheck disable=SC2086
one=$(to_bytes $one)
# The 2 ranks on this host.
refusal=$(POPKIT_HOST_MEMORY=1 "${mpirun[@]}" -np 2 -x POPKIT_HOST_MEMORY "${run[@]}" \
  --run-dir two 2>&1)
host=$(sed -nE 's/.*the 2 ranks on this host need ([0-9.]+) ([KMG]?i?B) of host memory: .* a rank .*/\1 \2/p' <<<"$refusal")
[ -n "$host" ] || {
  fail "2 ranks: no estimate for the host in the refusal: $refusal"
  finish
}
# shellcheck disable=SC2086
host=$(to_bytes $host)
[ "$one" -lt "$host" ] || {
  fail "2 ranks need $host B together, not more than one process ($one B)"
  finish
}
echo "one process needs $one B; 2 ranks on this host $host B"

# Between the two: each rank alone would fit, both together do not.
between=$(((one + host) / 2))
POPKIT_HOST_MEMORY=$between "${mpirun[@]}" -np 2 -x POPKIT_HOST_MEMORY "${run[@]}" \
  --run-dir between >between.out 2>between.err
rc=$?
[ "$rc" = 2 ] || fail "with $between B available: exit $rc, want 2 (refused): $(cat between.err)"
errors=$(grep -c '^poprun[a-z ]*: error:' between.err)
[ "$errors" = 1 ] || fail "with $between B available: $errors error lines, want 1: $(cat between.err)"
grep -q "^poprun[a-z ]*: error: rank 0: the 2 ranks on this host need .* but this machine has" between.err ||
  fail "with $between B available: the error does not name the host's need: $(cat between.err)"
[ ! -e between ] || fail "the refused run left between/: $(ls -a between)"

# Enough for both: the run trains.
POPKIT_HOST_MEMORY=$((2 * host)) "${mpirun[@]}" -np 2 -x POPKIT_HOST_MEMORY "${run[@]}" \
  --run-dir enough >enough.out 2>enough.err ||
  fail "with $((2 * host)) B available: exit $?, want 0: $(cat enough.err)"
[ -e enough/run.json ] || fail "the run with enough memory wrote no enough/run.json"
finish mpi.host_memory
