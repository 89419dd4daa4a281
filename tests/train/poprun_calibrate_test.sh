#!/usr/bin/env bash
# poprun calibrate as a user runs it: it writes a profile that loads and validates, with
# positive, plausible figures, that popplan plans with (as a CPU's profile), and that
# `popreport compare` sets beside a CPU run; bad output paths are refused before any
# measurement (exit 2). No timing is asserted: the machine is shared.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

help=$(poprun calibrate --help)
for flag in --output --threads --name --passes; do
  grep -q -- "$flag" <<<"$help" || fail "calibrate --help lacks $flag: $help"
done
grep -q "calibrate" <<<"$(poprun --help)" || fail "poprun --help does not list calibrate"

# Bad output paths: exit 2, said at once, nothing written.
expect 2 "the folder 'no/such' does not exist" -- poprun calibrate -o no/such/cpu.yaml
expect 2 "poprun calibrate: error: --output: '.' is a folder, not a file name" -- poprun calibrate -o .
expect 2 "--output is required" -- poprun calibrate
expect 2 "--passes" -- poprun calibrate -o cpu.yaml --passes 0
[ ! -e no ] || fail "a bad path left something behind"

# Five passes, as a user's calibration makes; one in a sanitized build (POPKIT_SANITIZE),
# where five take minutes. What is asserted below holds of any pass, but one pass is moved
# more by a burst of other work (accumulate_seconds, a difference of two timings, passed
# 1 ns in 2 of 8 single passes at a load of about 15), so the test command keeps five.
passes=5
[ -z "${POPKIT_SANITIZE:-}" ] || passes=1
out=$(poprun calibrate -o cpu.yaml --threads 2 --name this-cpu --passes "$passes" 2>err.txt)
rc=$?
[ "$rc" = 0 ] || fail "calibrate exited $rc: $(cat err.txt)"
grep -q "^wrote cpu.yaml (device profile this-cpu); plan with it: --set device.profile=cpu.yaml" \
  <<<"$out" || fail "no 'wrote' line: $out"
grep -q "^fit: peak " <<<"$out" || fail "no GEMM fit line: $out"
[ "$(grep -c "^fit: warm up to " <<<"$out")" = 3 ] || fail "not 3 cache fit lines: $out"
[ -f cpu.yaml ] || fail "no profile written"
[ ! -e cpu.yaml.tmp ] || fail "temporary left behind"

# The figures: positive and plausible for a CPU core (a GEMM peak between 100 MFLOP/s and
# 10 TFLOP/s, copies between 10 MB/s and 1 TB/s, latencies below 10 ms), 2 threads.
CPUS=$(nproc) SANITIZED="${POPKIT_SANITIZE:-}" /usr/bin/python3 - cpu.yaml <<'PY' || fail "implausible profile: $(cat cpu.yaml)"
import os, re, sys
text = open(sys.argv[1]).read()
def get(key):
    m = re.search(r"^\s*" + key + r":\s*([-+.\deE]+)", text, re.M)
    assert m, key + " missing"
    return float(m.group(1))
assert "name: this-cpu" in text
assert 1e8 < get("flops_per_second") < 1e13
assert 1e7 < get("vector_flops_per_second") < 1e13
assert get("host_threads") == 2
# The running mean folded into the weight gradient: above 0 (0 would mean "unmeasured"),
# below 10 ns a weight (6-26 ps in calibrations on this 2-core machine, bench/README.md;
# 1.58 ns, a median of five passes, at a load of 8 while two builds ran, which failed the
# 1 ns this was held to; a figure in micro- or milliseconds still fails); a sanitizer
# instruments every load and store of that element-wise loop (2.7 ns a weight under TSan):
# 100 ns there.
accumulate_max = 1e-7 if os.environ["SANITIZED"] else 1e-8
assert 0 < get("accumulate_seconds") < accumulate_max, get("accumulate_seconds")
# The optimizer's step on cold state, and a lone replica's spread GEMMs (2 threads).
assert 1e7 < get("optimizer_flops_per_second") < 1e13
assert 0 < get("spread_efficiency") <= 1
for k in ("half_m", "half_n", "half_k"):
    assert 0 <= get(k) < 1e5, k
links, caches = text.split("\nlinks:")[1], text.split("\ncaches:")[1].split("\nlinks:")[0]
for b in re.findall(r"bytes_per_second:\s*([-+.\deE]+)", links):
    assert 1e7 < float(b) < 1e12, b
# The caches: each ramp's ends in order, its rates plausible; all 0 when nothing turned
# cold on this machine (caches larger than the sweep).
for prefix, rate_key in (("", "gemm"), ("small_rows_", "small_rows_gemm"), ("copy_", "copy")):
    warm, cold = get(prefix + "warm_bytes"), get(prefix + "cold_bytes")
    assert 0 <= warm <= cold < 1e12, (prefix, warm, cold)
    rate = get(rate_key + "_bytes_per_second")
    assert rate == 0 if cold == 0 else 1e7 < rate < 1e12, (prefix, rate)
for l in re.findall(r"latency_seconds:\s*([-+.\deE]+)", text):
    assert 0 <= float(l) < 1e-2, l
# Where the CPUs were: a cache line's round trip between two of them, above 0 with two
# CPUs (0 means "not measured", as on one), below 100 us.
trip = get("core_round_trip_seconds")
# ThreadSanitizer instruments every atomic of the ping-pong: its 11,000 trips may pass
# the measurement's 0.25 s, and then it reports none (0), as it would on a busy machine.
if not (os.environ["SANITIZED"] == "thread" and trip == 0):
    assert (0 < trip < 1e-4) if int(os.environ["CPUS"]) >= 2 else trip == 0, trip
# How much of the last-level cache the host left the threads: the cache probe, a call of
# a layer's kernels, between 1 us and 100 ms.
assert 1e-6 < get("probe_seconds") < 0.1, get("probe_seconds")
PY
grep -q "^core round trip (where the CPUs are) " <<<"$out" || fail "no core round trip line: $out"
grep -q "^cache probe (8.3 MiB a thread) " <<<"$out" || fail "no cache probe line: $out"

# It loads as a profile: popplan validates and plans with it, as a CPU's.
# Whether the profile has a round trip (two CPUs, and measured: see above).
trips=$(awk '/^  core_round_trip_seconds:/ { print ($2 > 0) ? 1 : 0 }' cpu.yaml)
[ "$(nproc)" -ge 2 ] || [ "$trips" = 0 ] || fail "one CPU, yet a round trip in the profile"
popplan validate "$config" --set device.profile=./cpu.yaml >/dev/null 2>err.txt ||
  fail "validate with the profile failed: $(cat err.txt)"
popplan plan "$config" --set device.profile=./cpu.yaml --format json -o plan.json 2>err.txt ||
  fail "plan with the profile failed: $(cat err.txt)"
TRIPS=$trips /usr/bin/python3 -c '
import json, os, sys
p = json.load(open("plan.json"))
assert p["device_profile"] == "this-cpu", p["device_profile"]
assert p["device_kind"] == "cpu", p["device_kind"]
assert p["estimated_samples_per_second"] > 0
# The profile'"'"'s round trip, carried for popreport compare (none from one CPU).
if os.environ["TRIPS"] == "1":
    assert 0 < p["device_core_round_trip_seconds"] < 1e-4
else:
    assert "device_core_round_trip_seconds" not in p
# And its cache probe, for the same.
assert 1e-6 < p["device_cache_probe_seconds"] < 0.1, p["device_cache_probe_seconds"]
' || fail "plan.json: $(head -c 400 plan.json)"

# popreport compare: the estimate beside a CPU run gets ratios; an ipu-mk2 plan does not.
poprun train "$config" --set device.profile=./cpu.yaml --steps 3 --out run/run.json -q \
  2>err.txt || fail "train: $(cat err.txt)"
# The run records where its CPUs were as its steps began and ended; on one CPU, nothing
# (under ThreadSanitizer, whose figures may be missing as in the profile, unchecked).
if [ "$trips" = 1 ] && [ "${POPKIT_SANITIZE:-}" != thread ]; then
  /usr/bin/python3 -c '
import json
e = json.load(open("run/run.json"))["environment"]["core_round_trip_seconds"]
assert 0 < e["start"] < 1e-4 and 0 < e["end"] < 1e-4, e
' || fail "run.json: no core round trips: $(grep -A3 core_round_trip run/run.json)"
fi
# And, its profile having a cache probe, the probe at both ends (3 steps: none between).
/usr/bin/python3 -c '
import json
e = json.load(open("run/run.json"))["environment"]["cache_probe_seconds"]
assert 1e-6 < e["min"] <= min(e["start"], e["end"]) <= max(e["start"], e["end"]) <= e["max"] < 0.1, e
assert e["probes"] >= 2, e
' || fail "run.json: no cache probes: $(grep -A6 cache_probe run/run.json)"
taskset -c 0 poprun train "$config" --steps 3 --out one-cpu/run.json -q 2>err.txt ||
  fail "train on one CPU: $(cat err.txt)"
grep -q core_round_trip_seconds one-cpu/run.json && fail "one CPU, yet a core round trip"
# Its profile (the built-in cpu) has no probe to compare with: none taken.
grep -q cache_probe_seconds one-cpu/run.json && fail "no probe in the profile, yet one in the run"
popplan plan "$config" --set device.profile=ipu-mk2 --format json -o ipu.json 2>err.txt ||
  fail "plan for ipu-mk2: $(cat err.txt)"
cmp=$(popreport compare plan.json run/run.json --names estimate,measured 2>&1) ||
  fail "compare failed: $cmp"
grep -q "estimate for CPU (this-cpu)" <<<"$cmp" || fail "compare does not say the CPU estimate: $cmp"
grep -q "n/a" <<<"$cmp" && fail "a CPU estimate and a CPU run were not compared: $cmp"
cmp=$(popreport compare ipu.json run/run.json --names ipu,measured 2>&1) ||
  fail "compare failed: $cmp"
grep -q "n/a" <<<"$cmp" || fail "an ipu-mk2 estimate was set against a CPU run: $cmp"
# (its notes are wrapped to 100 columns: read as one line)
grep -q "an estimate for one device against a measurement on another measures neither" \
  <<<"$(tr -s ' \n' ' ' <<<"$cmp")" || fail "compare does not say why: $cmp"
finish poprun_calibrate
