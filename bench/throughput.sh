#!/usr/bin/env bash
# End-to-end throughput of `poprun train` against the PyTorch reference, side by side
# on this machine, on real MNIST: for each configuration below, popkit and PyTorch run in
# alternation (A B A B ...), and the ratio popkit / PyTorch of each round's medians is
# printed as min / median / max over the rounds. Also phased / standard, io_overlapped /
# io, the GEMM-bound fraction, and the build the user gets (`release`, its kernels
# chosen at run time) against a `-march=native` build.
#
#   bench/throughput.sh [--build DIR] [--native DIR] [--bench FILE] [--rounds N] [--quick]
#
#   --build   the build to measure (default build/release: the README's set-up)
#   --native  a -march=native build for the release / native rows (default build/native;
#             skipped when absent)
#   --bench   engine_bench, for the machine's sgemm rate (default DIR/bench/engine_bench
#             of --native or --build; the GEMM-bound rows are skipped without one)
#
# popkit's figure is the run file's steady-state samples/s (median over the steps after
# warm-up, reports/run_record.h); PyTorch's is bench/torch_reference.py's median of
# repeats after warm-up, at its best: one OpenBLAS thread, the better of OpenBLAS's own
# kernel choice and OPENBLAS_CORETYPE=Haswell in each round. PyTorch must run on
# OpenBLAS (on the reference BLAS it is 20x slower and every ratio meaningless): the
# script installs python3-torch and libopenblas0-pthread when it can, and refuses to
# run when libblas.so.3 is another BLAS.
#
# Every run trains on data whose loss stays above zero (checked: a loss of 0 means
# subnormal arithmetic was timed). Configurations (examples/mnist.yaml, dataset mnist):
#   (a) phased example: R 2, micro-batch 8, accumulation 4, threshold 512, phased, io
#       (also with execution.io_schedule: preload, and with io_overlapped)
#   (b) the same in standard mode
#   (c) R 2, micro-batch 128, accumulation 1 (standard)
#   (d) R 1, batch 256 (standard)
#   (e) bench/io_heavy.yaml (784 -> 64 -> 64 -> 64 -> 10, R 1, micro-batch 1024, phased)
#       on one compute thread, so the other core is free for io_overlapped's IO thread
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/release"
native="$root/build/native"
bench=""
rounds=3
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --native) native="$2"; shift 2 ;;
    --bench) bench="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --quick) quick=1; rounds=1; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done

poprun="$build/cli/poprun"
python=/usr/bin/python3
bench_need "cmake --preset release && cmake --build --preset release" "$poprun"
native_poprun="$native/cli/poprun"
[[ -x "$native_poprun" ]] || native_poprun=""
if [[ -z "$bench" ]]; then
  for b in "$native/bench/engine_bench" "$build/bench/engine_bench"; do
    if [[ -x "$b" ]]; then bench="$b"; break; fi
  done
fi
echo "popkit: $("$poprun" --version | tr '\n' ';')" >&2
[[ -n "$native_poprun" ]] && echo "native: $("$native_poprun" --version | tr '\n' ';')" >&2

# PyTorch on OpenBLAS, or no comparison at all.
blas_link() {
  update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p'
}
if ! "$python" -c 'import torch' 2>/dev/null || [[ "$(blas_link)" != *openblas* ]]; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "throughput.sh: installing python3-torch and libopenblas0-pthread" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3-torch libopenblas0-pthread >/dev/null
  fi
fi
"$python" -c 'import torch' 2>/dev/null ||
  { echo "throughput.sh: Debian's python3-torch is not installed (apt-get install python3-torch libopenblas0-pthread)" >&2; exit 2; }
case "$(blas_link)" in
  *openblas*) ;;
  *) echo "throughput.sh: libblas.so.3 is '$(blas_link)', not OpenBLAS: PyTorch would run 20x slow" \
       "(update-alternatives --config libblas.so.3-x86_64-linux-gnu)" >&2; exit 2 ;;
esac
echo "PyTorch BLAS: $(blas_link)" >&2
bash "$root/scripts/fetch_data.sh" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# popkit steps per run: about 2-4 s each on a 2-core machine; PyTorch steps likewise.
if [[ $quick == 1 ]]; then scale=1; else scale=2; fi
base=(--set data.dataset=mnist --set training.seed=42)
declare -A popkit_sets popkit_steps popkit_config popkit_flags popkit_binary
popkit_sets[a]=""
popkit_sets[a_overlapped]="execution.io_mode=io_overlapped"
popkit_sets[a_preload]="execution.io_schedule=preload"
popkit_sets[a_again]=""  # (a) once more: how far two runs of one configuration differ
popkit_sets[b]="execution.mode=standard remote.weights=false remote.optimizer_state=false"
popkit_sets[c]="execution.mode=standard remote.weights=false remote.optimizer_state=false training.micro_batch_size=128 training.gradient_accumulation=1"
popkit_sets[d]="execution.mode=standard remote.weights=false remote.optimizer_state=false replication.factor=1 replication.groupings.everyone.group_size=1 training.micro_batch_size=256 training.gradient_accumulation=1"
popkit_steps[a]=$((100 * scale)); popkit_steps[a_overlapped]=$((100 * scale)); popkit_steps[b]=$((100 * scale))
popkit_steps[a_preload]=$((100 * scale))
popkit_steps[a_again]=$((100 * scale))
popkit_steps[c]=$((40 * scale)); popkit_steps[d]=$((40 * scale))
popkit_sets[e]=""
popkit_sets[e_overlapped]="execution.io_mode=io_overlapped"
for e in e e_overlapped; do
  popkit_config[$e]="$here/io_heavy.yaml"; popkit_flags[$e]="--threads 1"; popkit_steps[$e]=$((100 * scale))
done
# The build the user gets against a native one, on (a) and (c).
for n in a c; do
  popkit_sets[${n}_native]="${popkit_sets[$n]}"; popkit_steps[${n}_native]="${popkit_steps[$n]}"
  popkit_binary[${n}_native]="$native_poprun"
done

# PyTorch modes for the same shapes: name -> torch_reference.py arguments.
declare -A torch_args
torch_args[a_emulated]="--mode emulated --micro-batch 8 --replicas 2 --accumulation 4 --steps $((20 * scale))"
torch_args[a_plain]="--mode plain --micro-batch 8 --replicas 2 --accumulation 4 --steps $((20 * scale))"
torch_args[c_plain]="--mode plain --micro-batch 128 --replicas 2 --accumulation 1 --steps $((8 * scale))"
torch_args[c_emulated]="--mode emulated --micro-batch 128 --replicas 2 --accumulation 1 --steps $((8 * scale))"
torch_args[c_ddp]="--mode ddp --micro-batch 128 --replicas 2 --accumulation 1 --steps $((8 * scale))"
torch_args[d_plain]="--mode plain --micro-batch 256 --replicas 1 --accumulation 1 --steps $((8 * scale))"

# One popkit run; prints the run file's median samples/s.
popkit() {
  local name="$1" sets=()
  for s in ${popkit_sets[$name]}; do sets+=(--set "$s"); done
  # shellcheck disable=SC2086
  "${popkit_binary[$name]:-$poprun}" train "${popkit_config[$name]:-$root/examples/mnist.yaml}" -q \
    --steps "${popkit_steps[$name]}" ${popkit_flags[$name]:-} \
    --out "$work/$name.json" --force "${base[@]}" "${sets[@]}" >"$work/$name.log" 2>&1 ||
    { echo "throughput.sh: poprun train failed for ($name):" >&2; cat "$work/$name.log" >&2; exit 1; }
  "$python" -c '
import json, sys
r = json.load(open(sys.argv[1]))
if r["loss"][-1] <= 1e-3:
    sys.exit(f"throughput.sh: ({sys.argv[2]}) loss {r['loss'][-1]} at the last step: the data "
             "collapsed, and subnormal arithmetic would be timed")
print(r["throughput"]["median"])' "$work/$name.json" "$name"
}

# One PyTorch run per OpenBLAS kernel choice (its own, and Haswell's AVX2 kernels);
# prints the better median samples/s.
torch() {
  local name="$1" best=0 coretype rate
  for coretype in own Haswell; do
    local env_args=(-u OPENBLAS_CORETYPE)
    [[ $coretype == Haswell ]] && env_args=(OPENBLAS_CORETYPE=Haswell)
    # shellcheck disable=SC2086
    env "${env_args[@]}" "$python" "$here/torch_reference.py" ${torch_args[$name]} --repeats 3 \
      --warmup 5 >"$work/torch_$name.json" 2>"$work/torch_$name.log" ||
      { echo "throughput.sh: torch_reference.py failed for $name:" >&2; cat "$work/torch_$name.log" >&2; exit 1; }
    rate=$("$python" -c '
import json, sys
r = json.load(open(sys.argv[1]))
if r["last_loss"] <= 1e-3:
    sys.exit(f"throughput.sh: PyTorch {sys.argv[2]}: loss {r['last_loss']}: the data collapsed")
print(r["samples_per_second"]["median"])' "$work/torch_$name.json" "$name")
    echo "torch_coretype $name:$coretype $round $rate" >>"$results"
    best=$("$python" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$best" "$rate")
  done
  echo "$best"
}

# The machine's sgemm rate, all cores (each its own single-threaded Eigen GEMM, as
# replicas run), from the microbenchmark; measured in every round, beside the runs it
# divides, so a load that slows both shows in both.
sgemm_rate() {
  bench_sgemm_rate "$bench" "$python" "$work"
}

# Alternate A B A B: every round runs every popkit configuration and every PyTorch mode
# once, interleaved, so load from other processes hits both sides alike.
results="$work/results.txt"
: >"$results"
uptime_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= rounds; round++)); do
  echo "round $round/$rounds" >&2
  [[ -n "$bench" ]] && echo "sgemm - $round $(sgemm_rate)" >>"$results"
  pairs=(a:a_emulated a_overlapped:- a_preload:- a_again:- b:a_plain c:c_plain -:c_emulated -:c_ddp d:d_plain
    e:- e_overlapped:-)
  [[ -n "$native_poprun" ]] && pairs+=(a_native:- c_native:-)
  for pair in "${pairs[@]}"; do
    p="${pair%%:*}" t="${pair##*:}"
    if [[ $p != - ]]; then echo "popkit $p $round $(popkit "$p")" >>"$results"; fi
    if [[ $t != - ]]; then echo "torch $t $round $(torch "$t")" >>"$results"; fi
  done
done
uptime_after="$(cut -d' ' -f1-3 /proc/loadavg)"

"$python" - "$results" "$uptime_before" "$uptime_after" "$work/e.json" <<'EOF'
import json, statistics, sys
from collections import defaultdict

path, load_before, load_after, e_run = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
v = defaultdict(dict)  # (tool, name) -> {round: samples/s}
for line in open(path):
    tool, name, rnd, rate = line.split()
    v[(tool, name)][int(rnd)] = float(rate)
rounds = sorted({r for d in v.values() for r in d})

def mmm(xs):
    return f"{min(xs):8.2f} {statistics.median(xs):8.2f} {max(xs):8.2f}"

def rates(tool, name):
    return [v[(tool, name)][r] for r in rounds]

# FLOPs per sample of 784 -> 512 -> 512 -> 512 -> 10: forward 2 in out per layer,
# backward 4 in out (2 without the input gradient of the first layer), Adam 12 per
# parameter per global batch.
layers = [(784, 512), (512, 512), (512, 512), (512, 10)]
params = sum(i * o + o for i, o in layers)
def flops_per_sample(global_batch):
    fwd = sum(2 * i * o for i, o in layers)
    bwd = sum((2 if k == 0 else 4) * i * o for k, (i, o) in enumerate(layers))
    return fwd + bwd + 12 * params / global_batch

print(f"rounds: {len(rounds)}; load average before {load_before}, after {load_after}")
sgemm = rates("sgemm", "-") if ("sgemm", "-") in v else []
if sgemm:
    print(f"machine sgemm (Eigen, all cores), per round: {mmm([x / 1e9 for x in sgemm])} GFLOP/s (min median max)")
# Which OpenBLAS kernels served PyTorch better, per mode (median over rounds).
for (tool, name) in sorted(k for k in v if k[0] == "torch_coretype"):
    print(f"PyTorch {name:24s} {statistics.median(rates(tool, name)):10.0f} samples/s")
print()
print(f"{'samples/s (median of rounds)':40s} {'popkit':>10s} {'torch':>10s}")
for p, t in [("a", "a_emulated"), ("a", "a_plain"), ("b", "a_emulated"),
             ("a_overlapped", None), ("a_preload", None), ("c", "c_plain"), (None, "c_emulated"), (None, "c_ddp"),
             ("d", "d_plain"), ("e", None), ("e_overlapped", None), ("a_native", None),
             ("c_native", None)]:
    if p and ("popkit", p) not in v:
        continue
    pk = f"{statistics.median(rates('popkit', p)):10.0f}" if p else f"{'':10s}"
    tk = f"{statistics.median(rates('torch', t)):10.0f}" if t else f"{'':10s}"
    print(f"{(p or '-') + ' / ' + (t or '-'):40s} {pk} {tk}")
print()
print(f"{'ratio (per round)':46s} {'min':>8s} {'median':>8s} {'max':>8s}  target")
# The noise floor: (a) against itself, run twice in each round.
same = [a / b for a, b in zip(rates("popkit", "a_again"), rates("popkit", "a"))]
def ratio(label, num, den, target=None):
    xs = [a / b for a, b in zip(num, den)]
    m = statistics.median(xs)
    if target is None:
        print(f"{label:46s} {mmm(xs)}")
        return
    ok = "met" if m >= target else "NOT met"
    print(f"{label:46s} {mmm(xs)}  >= {target} {ok}")
best_c = [max(v[("torch", m)][r] for m in ("c_plain", "c_emulated", "c_ddp")) for r in rounds]
ratio("(a) phased / torch emulated", rates("popkit", "a"), rates("torch", "a_emulated"), 5.0)
ratio("(a) phased / torch plain (batch 64)", rates("popkit", "a"), rates("torch", "a_plain"), 2.0)
ratio("(b) standard / torch emulated", rates("popkit", "b"), rates("torch", "a_emulated"), 5.0)
ratio("(c) R2 mb128 / torch best", rates("popkit", "c"), best_c)
ratio("(d) R1 b256 / torch plain", rates("popkit", "d"), rates("torch", "d_plain"))
ratio("phased / standard", rates("popkit", "a"), rates("popkit", "b"), 0.95)
print(f"{'noise floor: (a) run again / (a)':46s} {mmm(same)}")
ratio("io_overlapped / io (phased example)", rates("popkit", "a_overlapped"), rates("popkit", "a"))
ratio("preload / on_demand (phased example)", rates("popkit", "a_preload"), rates("popkit", "a"))
ratio("io_overlapped / io (e: IO-heavy, a core free)", rates("popkit", "e_overlapped"), rates("popkit", "e"))
if ("popkit", "a_native") in v:
    ratio("(a) this build / native build", rates("popkit", "a"), rates("popkit", "a_native"), 0.9)
    ratio("(c) this build / native build", rates("popkit", "c"), rates("popkit", "c_native"), 0.9)
# How visible (e)'s IO is: host and remote IO as a share of its measured op time (io).
kinds = defaultdict(float)
for ph in json.load(open(e_run))["phases"]:
    for k, sec in ph["measured_seconds_by_kind"].items():
        kinds[k] += sec
io_share = (kinds["host_io"] + kinds["remote"]) / sum(kinds.values())
print(f"(e) with io: host and remote IO are {100 * io_share:.1f}% of the op time (last round's run file)")
if sgemm:
    print()
    print(f"{'GEMM-bound fraction (each round its own sgemm)':46s} {'min':>8s} {'median':>8s} {'max':>8s}  target")
    for name, gb in [("a", 64), ("b", 64), ("c", 256), ("d", 256)]:
        f = flops_per_sample(gb)
        xs = [f * x / g for x, g in zip(rates("popkit", name), sgemm)]
        target = "0.8" if name == "c" else "-"
        print(f"({name}) {f / 1e6:.2f} MFLOP/sample x samples/s / sgemm{'':8s} {mmm(xs)}  {target}")
EOF
