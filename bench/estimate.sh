#!/usr/bin/env bash
# How far `popplan plan`'s estimate is from what `poprun train` then measures, on this
# machine, with a profile that `poprun calibrate` measured on it (issue 17 item 3): for
# each configuration below, the plan's estimated samples/s beside the measured ones and
# the error, estimated / measured - 1. Each round calibrates (unless --profile is given),
# plans every configuration with that profile, then runs them (A B C ..., the next round
# B C ... A: each round one row further on); a row's error is the median over the rounds
# of its round's estimate against its round's run. Measured: the run file's steady-state
# samples/s (the median over the steps after warm-up); spread: max / min - 1 of a row's
# runs: on a shared machine one run can differ from the next by 2x. Rows outside the tolerance are marked
# and counted; the exit code is 1 when any is.
#
# Like with like: a virtual machine moves its CPUs between the host's caches as its load
# changes, for seconds at a time, and other work on the host takes more or less of the
# last-level cache it shares, for tens of seconds; a run on CPUs placed otherwise, or with
# another share of the cache, than when the profile was measured runs on another machine
# than the one the estimate is for (poprun records a cache line's round trip between two
# CPUs, runner/placement.h, and a cache probe, runner/calibrate.h, in the profile and in
# the run file; popreport compare says when they differ). Such a run is made again; after
# two, the round calibrates again (the machine has changed since) and plans again; after
# four, the last is kept and marked. Every run made again is counted and listed with the
# table.
#
#   bench/estimate.sh [--build DIR] [--profile FILE] [--tolerance 0.15] [--rounds 3] [--quick]
#
#   --build      the build to measure (default build/release)
#   --profile    a profile for every round (default: each round, `poprun calibrate` writes one)
#   --tolerance  the largest |error| accepted (default 0.15)
#   --rounds     runs per configuration (default 3)
#   --quick      half the steps per run
#
# Configurations: examples/mnist.yaml (784 -> 512 -> 512 -> 512 -> 10, GELU, Adam, real
# MNIST) with `--set` overrides across R 1/2/4, micro-batch 8-256, accumulation 1-8,
# phased and standard, RTS on and off, io_mode compute, io and io_overlapped; printed
# with the table. Each run trains enough steps for its median to settle (2-5 s).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/release"
profile=""
tolerance=0.15
rounds=3
scale=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    --tolerance) tolerance="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --quick) scale=1; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done

poprun="$build/cli/poprun"
popplan="$build/cli/popplan"
popreport="$build/cli/popreport"
bench_need "bash scripts/build.sh release" "$poprun" "$popplan" "$popreport"
bash "$root/scripts/fetch_data.sh" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "popkit: $("$poprun" --version | tr '\n' ';')" >&2
uptime_before=$(uptime)

# Without --profile, every round calibrates first and plans with what it measured, as a
# user calibrates, plans and runs: on a shared machine the speed drifts over minutes, and
# an estimate is compared with the runs of its own round.
given_profile="$profile"
[[ -z "$given_profile" ]] || profile="$(cd "$(dirname "$profile")" && pwd)/$(basename "$profile")"
calibrate() {  # calibrate ROUND [AGAIN]
  [[ -z "$given_profile" ]] || return 0
  profile="$work/cpu-$1${2:-}.yaml"
  "$poprun" calibrate -o "$profile" >"$work/calibrate-$1.log" 2>&1 ||
    { echo "estimate.sh: poprun calibrate failed:" >&2; cat "$work/calibrate-$1.log" >&2; exit 1; }
  echo "round $1: poprun calibrate${2:+ (again)}:" >&2
  sed -n '/^fit:/p;/^element-wise/,/^calibration/p' "$work/calibrate-$1.log" | sed 's/^/  /' >&2
}

# Whether a run ran on the machine its profile measured: popreport compare says when its
# CPUs were placed otherwise (config::placement_differs) or it had another share of the
# cache (config::caches_differ). Prints the three round trips in ns (profile, the run's
# start, its end), the cache probes in us (profile, the run's least, its most, how many),
# then what differed.
machine_alike() {  # machine_alike RUN_JSON
  local notes differed=""
  jq -r '([.plan.device_core_round_trip_seconds // 0, .environment.core_round_trip_seconds.start // 0,
           .environment.core_round_trip_seconds.end // 0] | map(. * 1e9 | round)) +
         ([.plan.device_cache_probe_seconds // 0, .environment.cache_probe_seconds.min // 0,
           .environment.cache_probe_seconds.max // 0] | map(. * 1e6 | round)) +
         [.environment.cache_probe_seconds.probes // 0] | join(" ")' "$1" |
    tr '\n' ' '
  notes=$("$popreport" compare "$1" --format wide)  # notes unwrapped
  grep -q "ran with its CPUs placed otherwise" <<<"$notes" && differed+="placed"
  grep -q "ran with another share of the host's last-level cache" <<<"$notes" &&
    differed+="${differed:+,}cache"
  echo "${differed:-alike}"
  [[ -z "$differed" ]]
}
plan_all() {  # plans every row with the round's profile (its own variables: a run's are set)
  local row name sets steps args
  for row in "${configs[@]}"; do
    IFS='|' read -r name sets steps <<<"$row"
    args_of "$sets"
    "$popplan" plan "$root/examples/mnist.yaml" "${args[@]}" --format json \
      -o "$work/$name.plan.json" >"$work/$name.plan.log" 2>&1 ||
      { echo "estimate.sh: popplan plan failed for $name:" >&2; cat "$work/$name.plan.log" >&2; exit 1; }
  done
}

# name | --set overrides | steps (at --quick)
standard="execution.mode=standard remote.weights=false"
no_rts="sharding.weights=false sharding.optimizer_state=false"
configs=(
  "phased-r2-b8-a4-io||60"
  "phased-r2-b8-a4-overlapped|execution.io_mode=io_overlapped|60"
  "phased-r2-b8-a4-compute|execution.io_mode=compute|60"
  "phased-r4-b32-a2-io|replication.factor=4|30"
  "phased-r1-b64-a8-io|replication.factor=1 training.micro_batch_size=64 training.gradient_accumulation=8|20"
  "phased-r2-b128-a1-norts-overlapped|$no_rts training.micro_batch_size=128 training.gradient_accumulation=1 execution.io_mode=io_overlapped|30"
  "phased-r4-b256-a1-compute|replication.factor=4 training.micro_batch_size=256 training.gradient_accumulation=1 execution.io_mode=compute|10"
  "standard-r2-b8-a4-norts-io|$standard remote.optimizer_state=false $no_rts|60"
  "standard-r2-b128-a1-norts-compute|$standard remote.optimizer_state=false $no_rts training.micro_batch_size=128 training.gradient_accumulation=1 execution.io_mode=compute|30"
  "standard-r1-b256-a1-io|$standard remote.optimizer_state=false replication.factor=1 training.micro_batch_size=256 training.gradient_accumulation=1|20"
  "standard-r4-b16-a8-rts-io|$standard replication.factor=4 training.micro_batch_size=16 training.gradient_accumulation=8|15"
  "standard-r4-b64-a1-norts-overlapped|$standard remote.optimizer_state=false $no_rts replication.factor=4 training.micro_batch_size=64 training.gradient_accumulation=1 execution.io_mode=io_overlapped|30"
  "standard-r1-b8-a8-overlapped|$standard replication.factor=1 training.gradient_accumulation=8 execution.io_mode=io_overlapped|60"
  "standard-r2-b32-a2-rts-compute|$standard training.micro_batch_size=32 training.gradient_accumulation=2 execution.io_mode=compute|40"
)
# Unless set: the example's R 2, micro-batch 8, accumulation 4, RTS threshold 512 over
# every replica, io. Each row's steps double without --quick.
args_of() {  # args_of SETS: the --set arguments of a row
  args=(--set data.dataset=mnist --set training.seed=42 --set "device.profile=$profile")
  for s in $1; do args+=(--set "$s"); done
}
results="$work/results.tsv"
moved="$work/moved.tsv"  # the runs made again: round, row, machine_alike's line, samples/s
: >"$results"
: >"$moved"
# Each round starts one row further on, so whatever a row's place in the order costs
# (the run before it writing its checkpoints, say) falls on a different row each round.
n_rows=${#configs[@]}
for ((round = 1; round <= rounds; round++)); do
  calibrate "$round"
  plan_all
  for ((i = 0; i < n_rows; i++)); do
    row="${configs[$(((i + round - 1) % n_rows))]}"
    IFS='|' read -r name sets steps <<<"$row"
    for ((attempt = 1; ; attempt++)); do
      args_of "$sets"
      "$poprun" train "$root/examples/mnist.yaml" -q "${args[@]}" --steps $((steps * scale)) \
        --out "$work/$name.run.json" --force >"$work/$name.run.log" 2>&1 ||
        { echo "estimate.sh: poprun train failed for $name:" >&2; cat "$work/$name.run.log" >&2; exit 1; }
      machine=$(machine_alike "$work/$name.run.json") && { alike=yes; break; }
      alike=no
      printf '%s\t%s\t%s\t%s\n' "$round" "$name" "$machine" \
        "$(jq -r .throughput.median "$work/$name.run.json")" >>"$moved"
      ((attempt < 4)) || break
      if ((attempt == 2)); then
        calibrate "$round" "-again-$i"
        plan_all
      fi
    done
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$sets" \
      "$(jq -r .estimated_samples_per_second "$work/$name.plan.json")" \
      "$(jq -r .throughput.median "$work/$name.run.json")" "$alike" >>"$results"
  done
  echo "estimate.sh: round $round of $rounds done" >&2
done
uptime_after=$(uptime)

/usr/bin/python3 - "$results" "$tolerance" "$uptime_before" "$uptime_after" "$moved" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    if line.strip():
        name, sets, est, meas, alike = line.rstrip("\n").split("\t")
        r = rows.setdefault(name, {"sets": sets, "est": [], "runs": [], "alike": []})
        r["est"].append(float(est))
        r["runs"].append(float(meas))
        r["alike"].append(alike == "yes")
tol = float(sys.argv[2])
print(f"{'config':<36} {'estimated':>11} {'measured':>11} {'spread':>7} {'error':>8}   each round")
outside = []
for name, r in rows.items():
    meas = statistics.median(r["runs"])
    spread = max(r["runs"]) / min(r["runs"]) - 1
    # Each round's estimate against its own run; the median over the rounds.
    errs = [e / m - 1 for e, m in zip(r["est"], r["runs"])]
    err = statistics.median(errs)
    mark = "" if abs(err) <= tol else "  outside"
    if mark:
        outside.append(name)
    print(f"{name:<36} {statistics.median(r['est']):>11,.0f} {meas:>11,.0f} {spread:>6.0%} "
          f"{err:>+7.1%}   "
          f"{' '.join(f'{x * 100:+.0f}' + ('' if a else '*') for x, a in zip(errs, r['alike']))}"
          f"{mark}")
print(f"samples/s, the median over {len(next(iter(rows.values()))['runs'])} rounds; spread: of "
      f"the runs, max / min - 1; error: each round's estimate / its run - 1, the median over "
      f"the rounds (each round's, in %, after it); tolerance ±{tol:.0%}")
print(f"{len(rows) - len(outside)} of {len(rows)} within; outside: {', '.join(outside) or 'none'}")
moved = [l.rstrip("\n").split("\t") for l in open(sys.argv[5]) if l.strip()]
kept = sum(not a for r in rows.values() for a in r["alike"])
why = [m[2].split()[-1] for m in moved]
print(f"runs made again, on another machine than the round's profile measured: {len(moved)} "
      f"(CPUs placed otherwise: {sum('placed' in w for w in why)}; another share of the "
      f"cache: {sum('cache' in w for w in why)}); kept so after four (* above): {kept}")
for rnd, name, machine, meas in moved:
    trip_p, trip_s, trip_e, probe_p, probe_lo, probe_hi, probes, _ = machine.split()
    print(f"  round {rnd} {name}: core round trip {trip_s} ns at the start, {trip_e} ns at "
          f"the end, {trip_p} ns in the profile; cache probe {probe_lo} to {probe_hi} us "
          f"({probes} probes), {probe_p} us in the profile; {float(meas):,.0f} samples/s")
print(f"load before: {sys.argv[3].split('load average:')[-1].strip()}; "
      f"after: {sys.argv[4].split('load average:')[-1].strip()}")
print()
for name, r in rows.items():
    print(f"  {name}: {r['sets'] or '(the example as it is)'}")
sys.exit(1 if outside else 0)
EOF
