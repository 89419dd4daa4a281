#!/usr/bin/env bash
# How long SIGTERM takes to end `poprun train` at a random point of its steps:
# examples/quick.yaml at R replicas (4,096 by default: a step of about a second here),
# the signal 0 to 1.5 s after poprun reports step 1, then the seconds from the signal
# to the exit, the exit code and the step the checkpoint holds. A signal before the
# step's update abandons the step; one after it lets the step finish (docs/runs.md).
# With --processes N the run is N MPI ranks (poprun's launcher) and the signal goes to
# the launcher. With --during setup the signal comes instead 0 to 1 s after rank 0 has
# made the run folder, in the set-up (which at R 4096 takes seconds).
# Prints a markdown table, a row per try.
#
#   bench/stop_latency.sh [--build DIR] [--replicas R] [--tries N] [--processes N]
#                         [--during steps|setup]
#
# Needs a release build (default build/ci).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/ci"
replicas=4096
tries=10
processes=1
during=steps
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --tries) tries="$2"; shift 2 ;;
    --processes) processes="$2"; shift 2 ;;
    --during) during="$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
[[ "$during" == steps || "$during" == setup ]] || bench_fail "--during $during: steps or setup"
poprun="$build/cli/poprun"
bench_need "cmake --preset ci" "$poprun"
launch=()
if [[ "$processes" -gt 1 ]]; then
  launch=(--processes "$processes")
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

if [[ "$during" == setup ]]; then
  echo "| try | signal after the run folder (s) | exit | signal to exit (s) | poprun said |"
else
  echo "| try | signal after step 1 (s) | exit | signal to exit (s) | poprun said |"
fi
echo "|---:|---:|---:|---:|---|"
for i in $(seq "$tries"); do
  "$poprun" train "$root/examples/quick.yaml" --set replication.factor="$replicas" \
    --set data.synthetic_train=$((replicas * 32)) --set data.synthetic_test=$((replicas * 8)) \
    --steps 1000000 --run-dir "run-$i" "${launch[@]}" >out 2>err &
  pid=$!
  for _ in $(seq 1200); do
    if [[ "$during" == setup ]]; then
      [[ -d "run-$i" ]] && break
    else
      grep -q "step 1/" err 2>/dev/null && break
    fi
    sleep 0.05
  done
  if [[ "$during" == setup ]]; then
    delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", rand() }')
  else
    delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", rand() * 1.5 }')
  fi
  sleep "$delay"
  sent=$(date +%s.%N)
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  took=$(awk -v a="$sent" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  said=$(grep -m1 -o "^poprun: stopped by SIG[A-Z0-9]* \(at step [0-9]*\|during set-up\)" err || true)
  abandoned=$(grep -m1 -o "step [0-9]* stopped before its update" err || true)
  echo "| $i | $delay | $rc | $took | ${said}${abandoned:+ ($abandoned)} |"
done
