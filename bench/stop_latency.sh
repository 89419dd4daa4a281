#!/usr/bin/env bash
# How long SIGTERM takes to end `poprun train` at a random point of its steps:
# examples/quick.yaml at R replicas (4,096 by default: a step of about a second here),
# the signal 0 to 1.5 s after poprun reports step 1, then the seconds from the signal
# to the exit, the exit code and the step the checkpoint holds. A signal before the
# step's update abandons the step; one after it lets the step finish (docs/runs.md).
# Prints a markdown table, a row per try.
#
#   bench/stop_latency.sh [--build DIR] [--replicas R] [--tries N]
#
# Needs a release build (default build/ci).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/ci"
replicas=4096
tries=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --tries) tries="$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
poprun="$build/cli/poprun"
bench_need "cmake --preset ci" "$poprun"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "| try | signal after step 1 (s) | exit | signal to exit (s) | poprun said |"
echo "|---:|---:|---:|---:|---|"
for i in $(seq "$tries"); do
  "$poprun" train "$root/examples/quick.yaml" --set replication.factor="$replicas" \
    --set data.synthetic_train=$((replicas * 32)) --set data.synthetic_test=$((replicas * 8)) \
    --steps 1000000 --run-dir "run-$i" >out 2>err &
  pid=$!
  for _ in $(seq 1200); do
    grep -q "step 1/" err 2>/dev/null && break
    sleep 0.05
  done
  delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", rand() * 1.5 }')
  sleep "$delay"
  sent=$(date +%s.%N)
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  took=$(awk -v a="$sent" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  said=$(grep -m1 -o "^poprun: stopped by SIG[A-Z]* at step [0-9]*" err || true)
  abandoned=$(grep -m1 -o "step [0-9]* stopped before its update" err || true)
  echo "| $i | $delay | $rc | $took | ${said}${abandoned:+ ($abandoned)} |"
done
