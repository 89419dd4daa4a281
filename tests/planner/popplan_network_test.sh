#!/usr/bin/env bash
# popplan plan over a network of hosts, as a user runs it: --replicas-per-host spreads the
# replicas, the text shows what crosses the network and the step time with it, the JSON
# holds it and validates; bad values and a network option alone are invalid input (2).
set -euo pipefail
src=$POPKIT_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cfg=$src/examples/mnist_offchip_optimizer.yaml  # R=4, everyone in one group

plain=$(popplan plan "$cfg") || fail "plan exited $?"
grep -qF "network:" <<<"$plain" && fail "a plan without --replicas-per-host shows a network"

out=$(popplan plan "$cfg" --replicas-per-host 2 --network-gbps 10 --network-latency-us 5) \
  || fail "plan --replicas-per-host 2 exited $?"
for want in "  network: 2 hosts x 2 replicas, 10 Gb/s links, 5 us per message" \
            "    collectives per replica per step: " "across hosts (sent + received)" \
            "    crossing the network per step: " "the network adds "; do
  grep -qF -- "$want" <<<"$out" || fail "plan text lacks '$want': $(grep -F network <<<"$out")"
done

# One host for all four replicas: nothing crosses, the estimate is the plain one.
one=$(popplan plan "$cfg" --replicas-per-host 4) || fail "plan --replicas-per-host 4 exited $?"
grep -qF "within its host, 0 B across hosts" <<<"$one" || fail "one host: $(grep -F across <<<"$one")"
grep -qF "the network adds 0 s" <<<"$one" || fail "one host adds time"
[ "$(grep -oE 'estimated [0-9.]+ ms' <<<"$one")" = "$(grep -oE 'estimated [0-9.]+ ms' <<<"$plain")" ] \
  || fail "one host changed the estimate"

# JSON: the network object, valid against the schema; a faster link, a shorter step.
for gbps in 10 100; do
  popplan plan "$cfg" --replicas-per-host 1 --network-gbps $gbps --format json \
    -o "$tmp/plan$gbps.json" || fail "json plan at $gbps Gb/s exited $?"
done
/usr/bin/python3 - "$src/schemas/plan.schema.json" "$tmp/plan10.json" "$tmp/plan100.json" <<'PY' \
  || fail "network plans"
import json, sys, jsonschema
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
slow, fast = (json.load(open(f)) for f in sys.argv[2:])
for p in (slow, fast):
    v.validate(p)
n = slow["network"]
assert n["n_hosts"] == 4 and n["replicas_per_host"] == 1, n
assert n["bytes_per_second"] == 1.25e9 and n["latency_seconds"] == 5e-6, n
assert n["on_host_bytes"] == 0 and n["network_bytes"] == 4 * n["cross_host_bytes"] // 2, n
assert fast["estimated_step_seconds"] < slow["estimated_step_seconds"], (fast, slow)
saved = slow["estimated_step_seconds"] - fast["estimated_step_seconds"]
want = n["busiest_link_bytes"] * (1 / 1.25e9 - 1 / 12.5e9)
assert abs(saved - want) <= 1e-9 * slow["estimated_step_seconds"], (saved, want)
PY

expect_invalid() {
  set +e
  popplan plan "$cfg" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "popplan plan $* exited $rc, want 2"
  grep -qF -- "$want" "$tmp/err" || fail "popplan plan $*: $(cat "$tmp/err")"
}
want="--network-gbps requires --replicas-per-host" expect_invalid --network-gbps 100
want="--replicas-per-host" expect_invalid --replicas-per-host 0
want="--network-gbps" expect_invalid --replicas-per-host 2 --network-gbps 0
want="--network-latency-us" expect_invalid --replicas-per-host 2 --network-latency-us -1
echo "popplan network: ok"
