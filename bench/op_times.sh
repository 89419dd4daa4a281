#!/usr/bin/env bash
# Where an estimate goes wrong, op by op: the cost model's price of each op of a plan
# beside the time the engine spent in it, per step, for one configuration. It needs a
# build with bench/op-times.patch applied (a temporary clock around every engine op and
# a print of every op's price; neither belongs in the product):
#
#   git worktree add /tmp/op-times HEAD && cd /tmp/op-times && git apply bench/op-times.patch
#   cmake --preset release && cmake --build build/release --target poprun popplan
#   bash bench/op_times.sh --build build/release --profile cpu.yaml --steps 120 \
#       [--set key=value ...]          # the config: examples/mnist.yaml with these overrides
#
# Prints, per phase and op label (a repeat's body summed over its steps): estimated and
# measured microseconds per step (the mean over the replicas, and the slowest), then per
# phase its estimate, its wall time, its ops' and collectives' times, and the gap: the
# wall time no op accounts for; of it, with R > 1, the segments' runs of the pool per
# step, their time beyond the slowest replica's ops (pool) and the slowest replica's
# beyond the mean (waits).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="" profile="" steps=120 sets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
[[ -n "$build" && -n "$profile" ]] || bench_fail "--build and --profile are required"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
args=(--set data.dataset=mnist --set training.seed=42 --set "device.profile=$profile" "${sets[@]}")
POPKIT_EST=1 "$build/cli/popplan" plan "$root/examples/mnist.yaml" "${args[@]}" --format json \
  -o "$work/plan.json" 2>"$work/est" >/dev/null || true
POPKIT_OP_TIMES=1 "$build/cli/poprun" train "$root/examples/mnist.yaml" -q "${args[@]}" \
  --steps "$steps" --out "$work/run.json" --force 2>"$work/opt" >/dev/null
/usr/bin/python3 - "$work" "$steps" <<'PY'
import collections, json, sys
work, steps = sys.argv[1], int(sys.argv[2])
plan = json.load(open(f"{work}/plan.json")); run = json.load(open(f"{work}/run.json"))
mb = f"b{plan['micro_batch_size']}:"  # the training plan's ops, not evaluation's
est = collections.OrderedDict()
for line in open(f"{work}/est"):
    f = line.rstrip("\n").split("\t")
    if len(f) < 4 or not f[1].startswith(mb): continue
    if f[0] == "EST": est[(f[1], f[2])] = est.get((f[1], f[2]), 0) + float(f[3])
    elif f[0] == "ESTR": est[(f[1], "  " + f[2])] = est.get((f[1], "  " + f[2]), 0) + float(f[3])
meas = collections.defaultdict(lambda: collections.defaultdict(float))
for line in open(f"{work}/opt"):
    f = line.rstrip("\n").split("\t")
    if f[0] == "OPT" and f[1].startswith(mb): meas[(f[1], f[2])][f[3]] += float(f[4]) / steps
def replicas(d):
    rs = [v for k, v in d.items() if k.startswith("r")] or [sum(d.values())]
    return sum(rs) / len(rs), max(rs)
e, m = plan["estimated_samples_per_second"], run["throughput"]["median"]
print(f"estimated {e:,.0f} samples/s, measured {m:,.0f} (median step): {e / m - 1:+.1%}")
print(f"{'phase':<42} {'op':<42} {'est us':>8} {'meas us':>8} {'slowest':>8}")
for (ph, label), t in est.items():
    d = meas.get((ph, label.strip()))
    if d is None and t < 1e-7: continue
    mean, most = replicas(d) if d else (0.0, 0.0)
    print(f"{ph[len(mb):][:42]:<42} {label[:42]:<42} {t * 1e6:8.1f} {mean * 1e6:8.1f} {most * 1e6:8.1f}")
print(f"\n{'phase':<42} {'est us':>8} {'wall us':>8} {'ops':>8} {'coll':>8} {'gap':>8} "
      f"{'runs':>5} {'pool':>8} {'waits':>8}")
phase_est = {p["name"]: p["estimated_seconds"] for p in plan["phases"]}
for name, pe in phase_est.items():
    wall = ops = coll = pool = waits = runs = 0.0
    for (ph, label), d in meas.items():
        if ph != mb + name: continue
        if label == "PHASE": wall += sum(d.values())
        elif label == "DISP": pool += d["x"]
        elif label == "IMB": waits += d["x"]
        elif label.startswith("SEGMENT") or label == "SEGOPS": pass
        elif "all" in d: coll += d["all"]
        else: ops += replicas(d)[0]
    for line in open(f"{work}/opt"):
        f = line.rstrip("\n").split("\t")
        if f[0] == "OPT" and f[1] == mb + name and f[2] == "DISP": runs += int(f[5]) / steps
    print(f"{name[:42]:<42} {pe * 1e6:8.1f} {wall * 1e6:8.1f} {ops * 1e6:8.1f} {coll * 1e6:8.1f} "
          f"{(wall - ops - coll) * 1e6:8.1f} {runs:5.1f} {pool * 1e6:8.1f} {waits * 1e6:8.1f}")
PY
