#!/usr/bin/env bash
# One CLI convention for the three tools: unknown flags and verbs get "did you mean" in
# the order typed (exit 2), every verb takes -q/--quiet, -o/--output where a verb writes
# a file (poprun's --out still works), exit codes (130 included) and where the
# documentation is in every --help.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"

out=$(popplan plan "$config" --fromat json 2>&1 >/dev/null)
[ $? = 2 ] || fail "an unknown flag did not exit 2"
[ "$out" = "popplan plan: error: unknown flag '--fromat'; did you mean '--format'?
popplan plan: error: unexpected argument 'json'
Run 'popplan plan --help' for more information." ] || fail "unknown flag message: $out"

out=$(popplan plna "$config" 2>&1 >/dev/null)
[ $? = 2 ] || fail "an unknown verb did not exit 2"
[ "$out" = "popplan: error: unknown verb 'plna'; did you mean 'plan'?
Run 'popplan --help' for more information." ] || fail "unknown verb message: $out"
expect 2 "popreport: error: unknown verb 'frobnicate' (verbs: memory, throughput, compare)" -- popreport frobnicate x.json
expect 2 "poprun train: error: unknown flag '--chekpoint-dir'; did you mean '--checkpoint-dir'?" -- poprun train "$config" --chekpoint-dir=x
expect 2 "popplan schema: error: unknown flag '--bogus'" -- popplan schema --bogus

# Every error is "TOOL VERB: error: MESSAGE". A file argument that cannot be read is the
# tool's error, as gcc's "gcc: error: x.c: No such file" (exit 2); what is wrong inside a
# file keeps the compiler form, file:line:column: error:.
expect 2 "poprun train: error: nosuch.yaml: no such file" -- poprun train nosuch.yaml
expect 2 "poprun eval: error: nosuch.yaml: no such file" -- poprun eval nosuch.yaml --checkpoint x
expect 2 "popplan plan: error: nosuch.yaml: no such file" -- popplan plan nosuch.yaml
expect 2 "popplan groups: error: nosuch.yaml: no such file" -- popplan groups nosuch.yaml
expect 2 "popplan tune: error: nosuch.yaml: no such file" -- popplan tune nosuch.yaml --memory-per-replica 1GiB
expect 2 "popplan calibrate: error: nosuch.csv: no such file" -- popplan calibrate --table nosuch.csv
expect 2 "popreport memory: error: nosuch.json: no such file" -- popreport memory nosuch.json
# A required argument is named as the usage shows it.
expect 2 "popplan plan: error: CONFIG is required" -- popplan plan
expect 2 "poprun train: error: CONFIG is required" -- poprun train
expect 2 "popplan validate: error: FILES is required" -- popplan validate
expect 2 "popreport memory: error: FILES is required" -- popreport memory
popplan plan --help | grep -q "^Usage: popplan plan \[OPTIONS\] CONFIG$" || fail "popplan plan usage: $(popplan plan --help | grep Usage)"

# Bad numbers: exit 2, in words (never CLI11's "Could not convert" or a range to 1.8e308).
expect 2 "popplan tune: error: --replicas: must be > 0, got 0" -- popplan tune "$config" --memory-per-replica 1GiB --replicas 0
expect 2 "popplan tune: error: --global-batch: must be > 0, got -4" -- popplan tune "$config" --memory-per-replica 1GiB --global-batch -4
expect 2 "popplan calibrate: error: --tolerance: must be >= 0, got -1" -- popplan calibrate --table x.csv --tolerance -1
expect 2 "poprun train: error: --steps: 'abc' is not a whole number" -- poprun train "$config" --steps abc
expect 2 "poprun train: error: --steps: '2.5' is not a whole number" -- poprun train "$config" --steps 2.5
out=$(poprun calibrate -o cpu.yaml --passes 0 2>&1 >/dev/null)
[ $? = 2 ] && [ "$(head -1 <<<"$out")" = "poprun calibrate: error: --passes: must be > 0, got 0" ] || fail "--passes 0: $out"
expect 2 "popplan groups: error: --factor: 'abc' is not a whole number" -- popplan groups --factor abc
expect 2 "popplan groups: error: give CONFIG, or --factor, --group-size (and --stride), all >= 1: --group-size is missing" \
  -- popplan groups --factor 1099511627776
expect 2 "popplan plan: error: --network-gbps: 'fast' is not a number" -- popplan plan "$config" --replicas-per-host 1 --network-gbps fast

# An output FILE in a folder that does not exist: exit 2 before any work, the path as
# given (never a temporary's name), the same from every verb and spelling.
for cmd in "popplan plan $config -o" "popplan plan $config --chart" "popplan groups $config --chart" \
  "popplan groups $config -o" "popplan groups $config --out" "popplan tune $config --memory-per-replica 1GiB -o" "popplan tune $config --memory-per-replica 1GiB --write" \
  "popplan calibrate --table x.csv -o" "popplan schema -o" "popplan schema --out" "poprun calibrate -o" \
  "poprun calibrate --write" "poprun generate x --prompt a --tokens 1 -o" "popreport memory x.json -o" \
  "popreport memory x.json --chart" "popreport compare x.json --chart"; do
  flag=${cmd##* }
  [ "$flag" = -o ] && flag=--output
  # shellcheck disable=SC2086
  out=$($cmd no/such/out.file 2>&1 >/dev/null)
  rc=$?
  read -r tool verb _ <<<"$cmd"
  [ $rc = 2 ] && [ "$(head -1 <<<"$out")" = "$tool $verb: error: $flag: 'no/such/out.file': the folder 'no/such' does not exist" ] \
    || fail "'$cmd no/such/out.file' exited $rc: $out"
done
[ ! -e no ] || fail "a bad output path left something behind"

# popplan schema: stdout, or -o FILE.
popplan schema -o schema.json && popplan schema | cmp -s - schema.json || fail "popplan schema -o wrote another schema"
# popplan groups: the same, -o FILE or --out FILE.
popplan groups "$config" -o groups.txt && popplan groups "$config" | cmp -s - groups.txt \
  || fail "popplan groups -o wrote other tables"
popplan groups --factor 8 --group-size 2 --format json --out groups.json \
  && popplan groups --factor 8 --group-size 2 --format json | cmp -s - groups.json \
  || fail "popplan groups --out wrote other JSON"

for tool in popplan poprun popreport; do
  $tool --help | grep -q "130 stopped by SIGINT or SIGTERM" || fail "$tool --help does not document exit code 130"
  $tool --help | grep -q "docs/concepts.md" || fail "$tool --help does not name docs/"
done
for verb in "popplan validate" "popplan plan" "popplan groups" "popplan schema" "poprun train" \
  "poprun eval" "poprun generate" "popreport memory" "popreport throughput" "popreport compare"; do
  # shellcheck disable=SC2086
  $verb --help | grep -q -- "-q,--quiet" || fail "$verb has no -q/--quiet"
done
for verb in "popplan plan" "popplan groups" "popplan tune" "popplan calibrate" "popplan schema" \
  "poprun train" "poprun eval" "poprun generate" "poprun calibrate" "popreport memory" \
  "popreport throughput" "popreport compare"; do
  # shellcheck disable=SC2086
  $verb --help | grep -q -- "-o,--output" || fail "$verb has no -o/--output"
done

# --quiet: nothing on stdout, the outcome in the exit code.
out=$(popplan validate -q "$config")
[ $? = 0 ] && [ -z "$out" ] || fail "validate -q printed '$out'"
out=$(poprun train "$config" --steps 2 -q --out old/run.json 2>&1)
[ $? = 0 ] && [ -z "$out" ] || fail "train -q printed '$out'"
[ -f old/run.json ] || fail "--out (the old spelling) wrote no run file"
out=$(poprun train "$config" --steps 2 --format json -o new/run.json 2>/dev/null)
/usr/bin/python3 -c 'import json,sys; j = json.loads(sys.argv[1]); assert j["steps"] == 2 and j["run_file"] == "new/run.json", j' "$out" \
  || fail "train --format json: $out"
popreport memory new/run.json -o report.txt >/dev/null && [ -s report.txt ] || fail "popreport -o wrote nothing"
finish flags
