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
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="$root/build/ci"
replicas=4096
tries=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --replicas) replicas="$2"; shift 2 ;;
    --tries) tries="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stop_latency.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
poprun="$build/cli/poprun"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

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
  wait "$pid"
  rc=$?
  took=$(awk -v a="$sent" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  said=$(grep -m1 -o "^poprun: stopped by SIG[A-Z]* at step [0-9]*" err)
  abandoned=$(grep -m1 -o "step [0-9]* stopped before its update" err)
  echo "| $i | $delay | $rc | $took | ${said}${abandoned:+ ($abandoned)} |"
done
