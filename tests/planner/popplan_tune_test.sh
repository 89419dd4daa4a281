#!/usr/bin/env bash
# popplan tune as a user runs it: the MNIST example's candidates that fit, fastest first
# in rows of alike ones (within 1%) led by the fewest changes, only the changes shown,
# within 100 columns, the device profile named; JSON that says the same; a memory nothing
# fits in exits 1 with advice that fits or none; a bad size, or a global batch that does
# not split over the replicas, exits 2; a search past its bound is thinned and says so;
# -o FILE (--write too) writes the winner as a config that keeps the example's comments.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
cd "$POPKIT_SOURCE_DIR" || exit 1

out=$(popplan tune examples/mnist.yaml --memory-per-replica 900MiB)
rc=$?
[ "$rc" = 0 ] || fail "tune exited $rc"
head -1 <<<"$out" | grep -qE '^Ranked for device profile ipu-mk2 at 900.00 MiB per replica: [0-9]+ of [0-9]+ candidates fit, in [0-9]+ rows$' \
  || fail "tune header: $(head -1 <<<"$out")"
grep -qE '^Rank +Samples/s +Peak +Alike  Changes$' <<<"$out" || fail "tune table header: $out"
grep -qE '^ +1 +[0-9,]+ +[0-9.]+ [KM]iB  \* +[0-9]+  [a-z]' <<<"$out" \
  || fail "tune's first row: $(grep -E '^ +1 ' <<<"$out")"
# Only what a candidate changes: the example's own settings are not repeated.
grep -qF "execution.mode=phased" <<<"$out" && fail "a row repeats the example's execution.mode=phased"
wide=$(awk 'length($0) > 100' <<<"$out")
[ -z "$wide" ] || fail "tune lines over 100 columns: $wide"

json=$(popplan tune examples/mnist.yaml --memory-per-replica 4MiB --format json)
rc=$?
[ "$rc" = 0 ] || fail "tune --format json exited $rc"
/usr/bin/python3 - "$json" <<'PY' || fail "tune JSON"
import json, sys
r = json.loads(sys.argv[1])
c = r["candidates"]
assert 0 < len(c) < r["planned"], (len(c), r["planned"])
assert r["device_profile"] == "ipu-mk2" and r["memory_per_replica"] == 4 << 20, r
assert all(x["peak_bytes"] <= 4 * 1024 * 1024 for x in c)
# Rows: fastest first, a row's candidates within 1% of its fastest, led by the fewest changes.
ranks = [x["rank"] for x in c]
assert ranks == sorted(ranks) and ranks[0] == 1 and ranks[-1] == r["rows"] < len(c), ranks
fastest = [max(x["samples_per_second"] for x in c if x["rank"] == k) for k in range(1, r["rows"] + 1)]
assert all(a * 0.99 > b for a, b in zip(fastest, fastest[1:])), fastest
for x in c:
    assert x["samples_per_second"] >= 0.99 * fastest[x["rank"] - 1], x
    lead = next(y for y in c if y["rank"] == x["rank"])
    assert len(lead["changes"]) <= len(x["changes"]), (lead, x)
# The changes are settings, and the memory asked for is one (the example says 900MiB).
assert all(set(x["changes"]) <= set(x["settings"]) for x in c)
assert all("device.memory_per_replica=4MiB" in x["changes"] for x in c)
for a in c:  # the front: nothing at least as good in both and better in one
    dominated = any(b["peak_bytes"] <= a["peak_bytes"] and b["samples_per_second"] >= a["samples_per_second"]
                    and (b["peak_bytes"] < a["peak_bytes"] or b["samples_per_second"] > a["samples_per_second"])
                    for b in c)
    assert a["pareto"] == (not dominated), a
PY

expect 1 "popplan tune: nothing fits; nor with up to 64 times the replicas" -- \
  popplan tune examples/mnist.yaml --memory-per-replica 1KiB
# The config's own memory when --memory-per-replica is not given (mnist.yaml: ipu-mk2's
# 900 MiB); the first 20 rows by default, then how many more (86 rows were 206 lines),
# every row with --top 0.
top=$(popplan tune examples/mnist.yaml)
rows=$(head -1 <<<"$top" | grep -oE 'in [0-9]+ rows' | grep -oE '[0-9]+')
grep -qF "Ranked for device profile ipu-mk2 at 900.00 MiB per replica:" <<<"$top" || fail "tune's default memory: $(head -1 <<<"$top")"
[ -n "$rows" ] && [ "$rows" -gt 20 ] || fail "tune of mnist.yaml: $rows rows"
grep -qxF "  $((rows - 20)) more rows: --top 0 lists them all" <<<"$top" || fail "tune's top 20: $(tail -2 <<<"$top")"
[ "$(grep -cE '^ +[0-9]+ +[0-9,.]+ +[0-9.]+ [KMG]?i?B' <<<"$top")" = 20 ] || fail "tune lists not 20 rows"
all=$(popplan tune examples/mnist.yaml --top 0)
[ "$(grep -cE '^ +[0-9]+ +[0-9,.]+ +[0-9.]+ [KMG]?i?B' <<<"$all")" = "$rows" ] || fail "--top 0 lists not $rows rows"
# Nothing fits at 3 MiB on 2 replicas; on 4 it does, which is the advice (it was an empty
# table and nothing else), wrapped within 100 columns (it was one line of 299).
err=$(popplan tune examples/mnist.yaml --memory-per-replica 3MiB 2>&1 >/dev/null)
rc=$?
[ "$rc" = 1 ] || fail "tune at 3 MiB exited $rc, want 1"
[ -z "$(awk 'length($0) > 100' <<<"$err")" ] || fail "tune's advice is wider than 100 columns: $err"
grep -qF "popplan tune: nothing fits; fits with: --set device.memory_per_replica=3MiB --set replication.factor=4 --set training.gradient_accumulation=2 (peak 2.31 MiB of 3.00 MiB" \
  <<<"$(tr '\n' ' ' <<<"$err" | sed 's/  */ /g')" || fail "tune's advice at 3 MiB: $err"
# The same advice in JSON (it was on stderr only), and when nothing fits at all, the least
# peak planned.
/usr/bin/python3 - <(popplan tune examples/mnist.yaml --memory-per-replica 3MiB --format json 2>/dev/null) \
  <(popplan tune examples/mnist.yaml --memory-per-replica 1KiB --format json 2>/dev/null) <<'PY' \
  || fail "tune --format json lacks the advice"
import json, sys
fits, none = (json.load(open(p)) for p in sys.argv[1:3])
assert fits["candidates"] == [] and fits["advice"]["fits"], fits.get("advice")
assert "replication.factor=4" in fits["advice"]["settings"], fits["advice"]
assert fits["advice"]["peak_bytes"] <= 3 << 20, fits["advice"]
assert not none["advice"]["fits"] and none["advice"]["settings"] == [], none["advice"]
assert none["advice"]["peak_bytes"] > 1024 and none["advice"]["planned"] > none["planned"], none["advice"]
PY
# 256 replicas and a global batch of 2^18: 21,384 combinations (minutes of planning) are
# thinned to what --max-combinations allows, and the output says which values it tried.
out=$(timeout 300 popplan tune examples/mnist.yaml --memory-per-replica 900MiB --replicas 256 \
  --global-batch 262144)
rc=$?
[ "$rc" = 0 ] || fail "R 256 tune exited $rc"
grep -qF "the search has 21,384 combinations, more than --max-combinations (4,096): it tried only" <<<"$out" \
  || fail "R 256: $(head -5 <<<"$out")"
grep -qF "micro-batches 1, 8, 32, 1024 of 11 at 1 stage(s) of 256 replicas" <<<"$out" || fail "R 256: $out"
# Pipelined splits of more than 1,024 micro-batches a step (a plan of 65,536 takes 1.5 s)
# are not searched, and the output says which micro-batches were left.
grep -qF "pipelined, it tried at most 1,024 micro-batches a step:" <<<"$out" || fail "R 256: $out"
grep -qF "at 2 stage(s) of 128 replicas: micro-batches 2 to 2048, 11 of 12" <<<"$out" \
  || fail "R 256: $out"
expect 2 "the search has 21384 combinations, 1782 even with 2 sharding groups and 2 micro-batches (and the config's own) for each split of the devices, more than the 100 popplan tune plans at most; ask" -- \
  popplan tune examples/mnist.yaml --memory-per-replica 900MiB --replicas 256 --global-batch 262144 \
  --max-combinations 100
# A plan's time grows with the layers: past 64, --max-combinations is scaled by 64 over
# the layers. 2,000 layers (a plan takes 0.2 s) are refused at once, the limit named, when
# even the thinned search is larger; 300 layers at --max-combinations 2048 are thinned.
deep_dir=$(mktemp -d)
deep() {  # N: the MNIST example with N layers of 8 features
  sed -n '1,/^  layers:/p' examples/mnist.yaml
  for i in $(seq $(($1 - 1))); do echo "    - {name: f$i, type: linear, out_features: 8}"; done
  echo "    - {name: out, type: linear, out_features: 10}"
  sed -n '/^  loss:/,$p' examples/mnist.yaml
}
deep 2000 >"$deep_dir/2000.yaml"
deep 300 >"$deep_dir/300.yaml"
expect 2 "the search has 774 combinations, 378 even with 2 sharding groups and 2 micro-batches (and the config's own) for each split of the devices, more than the 131 popplan tune plans at most for a model of 2000 layers (4096 up to 64 layers)" -- \
  popplan tune "$deep_dir/2000.yaml"
out=$(popplan tune "$deep_dir/300.yaml" --max-combinations 2048 --top 1) \
  || fail "a 300-layer tune with --max-combinations 2048 exited $?"
grep -qF "the search has 774 combinations, more than --max-combinations allows for 300 layers (436): it tried only" <<<"$out" \
  || fail "300 layers, --max-combinations 2048: $(head -5 <<<"$out")"
rm -rf "$deep_dir"
expect 2 "popplan tune: error: --memory-per-replica 'lots'" -- \
  popplan tune examples/mnist.yaml --memory-per-replica lots
expect 2 "the global batch 63 does not split over 2 replicas" -- \
  popplan tune examples/mnist.yaml --memory-per-replica 900MiB --global-batch 63
# --write: every example's winner as a config file. Each comment line of the example is
# still there (trailing comments too), the file validates, and its plan is the plan of
# the example with the winner's settings; the flow maps and the missing keys of the
# examples (mnist_onchip.yaml has no sharding: section) are edited in place.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for example in examples/*.yaml; do
  name=$(basename "$example" .yaml)
  out="$tmp/$name.yaml"
  # The pipelined example's first stage holds fc1 with its Adam state (4.8 MiB even
  # sharded), and the tuner keeps the stage count: it needs a larger device.
  budget=4MiB
  [[ $name == *pipelined* ]] && budget=8MiB
  [[ $name == gpt_* ]] && budget=128MiB  # gpt_tiny's activations alone are 50 MiB
  [[ $name == gpt2_* ]] && budget=900MiB  # an IPU-Mk2's, which they are planned for
  popplan tune "$example" --memory-per-replica "$budget" --format json -o "$out" \
    >"$tmp/$name.json" 2>"$tmp/$name.err" || { fail "$name: tune --write exited $?: $(cat "$tmp/$name.err")"; continue; }
  grep -qF "wrote $out: $example with the winner's" "$tmp/$name.err" \
    || fail "$name: tune --write said: $(cat "$tmp/$name.err")"
  /usr/bin/python3 - "$example" "$out" <<'PY' || fail "$name: comments of the example lost"
import sys
src, out = (open(p, encoding="utf-8").read().splitlines() for p in sys.argv[1:])
for line in src:
    comment = line[line.index("#"):] if "#" in line else None
    if line.lstrip().startswith("#"):
        assert line in out, line
    elif comment:
        assert any(o.endswith(comment) for o in out), comment
PY
  popplan validate "$out" >/dev/null 2>&1 || fail "$name: the written config does not validate"
  mapfile -t sets < <(/usr/bin/python3 -c 'import json, sys
for s in json.load(open(sys.argv[1]))["candidates"][0]["settings"]: print("--set\n" + s)' "$tmp/$name.json")
  popplan plan "$out" --format json -o "$tmp/$name.written.plan.json" 2>/dev/null
  popplan plan "$example" "${sets[@]}" --format json -o "$tmp/$name.winner.plan.json" 2>/dev/null
  cmp -s "$tmp/$name.written.plan.json" "$tmp/$name.winner.plan.json" \
    || fail "$name: the written config plans otherwise than the winner"
done

# An existing file is refused without --force (exit 2, before any tuning), kept as it
# was; with --force it is replaced.
echo "mine" >"$tmp/taken.yaml"
expect 2 "popplan tune: error: -o $tmp/taken.yaml: the file exists; popplan tune does not overwrite a file: give another path, or --force to write over it" -- \
  popplan tune examples/quick.yaml --memory-per-replica 1MiB --write "$tmp/taken.yaml"
[ "$(cat "$tmp/taken.yaml")" = mine ] || fail "a refused --write changed the file"
popplan tune examples/quick.yaml --memory-per-replica 1MiB --write "$tmp/taken.yaml" --force \
  >/dev/null || fail "--write --force exited $?"
grep -qF "name: quick" "$tmp/taken.yaml" || fail "--write --force did not replace the file"
# Nothing fits: exit 1 and no file.
expect 1 "popplan tune: $tmp/none.yaml not written" -- \
  popplan tune examples/mnist.yaml --memory-per-replica 1KiB --write "$tmp/none.yaml"
[ ! -e "$tmp/none.yaml" ] || fail "a --write with nothing fitting wrote a file"
finish popplan_tune
