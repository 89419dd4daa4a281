#!/usr/bin/env bash
# --set through the real CLI: a good override keeps a config valid, a bad one makes
# it invalid (exit 2) with the error pointing into the --set argument.
set -uo pipefail
cd "$POPKIT_SOURCE_DIR"
fail() { echo "FAIL: $*"; exit 1; }
popplan validate --set training.micro_batch_size=4 --set replication.factor=2 examples/quick.yaml \
  >/dev/null || fail "valid overrides rejected"
out=$(popplan validate --set training.epochs=1 --set training.micro_batch_size=0 examples/quick.yaml)
rc=$?
[ "$rc" = 2 ] || fail "invalid override exited $rc, want 2"
want='--set:2:27: error: training.micro_batch_size: must be >= 1, got 0
training.micro_batch_size=0
                          ^
examples/quick.yaml: invalid (1 error)'
[ "$out" = "$want" ] || fail "output:
$out
want:
$want"
# An override may not sneak in an unknown key either.
out=$(popplan validate --set training.lr=0.1 examples/quick.yaml)
[ $? = 2 ] || fail "unknown override key accepted"
grep -q "^--set:1:10: error: training: unknown key 'lr'" <<<"$out" || fail "unknown key: $out"
# Warnings do not fail validation.
out=$(popplan validate --set replication.factor=1 --set 'sharding={threshold: 4}' examples/mnist_onchip.yaml)
[ $? = 0 ] || fail "a warning made validation fail: $out"
grep -q "warning: sharding: replication.factor is 1" <<<"$out" || fail "no warning: $out"
echo "overrides: ok"
