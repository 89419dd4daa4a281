#!/usr/bin/env bash
# popplan tune as a user runs it: the MNIST example's candidates that fit, fastest first,
# the first on the Pareto front, JSON that says the same; a memory nothing fits in exits
# 1; a bad size, or a global batch that does not split over the replicas, exits 2.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
cd "$POPKIT_SOURCE_DIR" || exit 1

out=$(popplan tune examples/mnist.yaml --memory-per-replica 900MiB)
rc=$?
[ "$rc" = 0 ] || fail "tune exited $rc"
head -1 <<<"$out" | grep -qE '^[0-9]+ of [0-9]+ candidates fit; \* marks the Pareto front' \
  || fail "tune header: $(head -1 <<<"$out")"
sed -n 3p <<<"$out" | grep -qE '^ +1 +[0-9]+ +[0-9.]+ [KM]iB  \*  execution.mode=' \
  || fail "tune's first candidate: $(sed -n 3p <<<"$out")"

json=$(popplan tune examples/mnist.yaml --memory-per-replica 4MiB --format json)
rc=$?
[ "$rc" = 0 ] || fail "tune --format json exited $rc"
/usr/bin/python3 - "$json" <<'PY' || fail "tune JSON"
import json, sys
r = json.loads(sys.argv[1])
c = r["candidates"]
assert 0 < len(c) < r["planned"], (len(c), r["planned"])
assert all(x["peak_bytes"] <= 4 * 1024 * 1024 for x in c)
sps = [x["samples_per_second"] for x in c]
assert sps == sorted(sps, reverse=True)
assert c[0]["pareto"] and c[0]["rank"] == 1
for a in c:  # the front: nothing at least as good in both and better in one
    dominated = any(b["peak_bytes"] <= a["peak_bytes"] and b["samples_per_second"] >= a["samples_per_second"]
                    and (b["peak_bytes"] < a["peak_bytes"] or b["samples_per_second"] > a["samples_per_second"])
                    for b in c)
    assert a["pareto"] == (not dominated), a
PY

expect 1 "" -- popplan tune examples/mnist.yaml --memory-per-replica 1KiB
expect 2 "popplan tune: --memory-per-replica 'lots'" -- \
  popplan tune examples/mnist.yaml --memory-per-replica lots
expect 2 "the global batch 63 does not split over 2 replicas" -- \
  popplan tune examples/mnist.yaml --memory-per-replica 900MiB --global-batch 63
finish popplan_tune
