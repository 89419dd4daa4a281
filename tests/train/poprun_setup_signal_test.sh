#!/usr/bin/env bash
# SIGTERM and SIGINT during `poprun train`'s set-up (planning, reading the data, building
# the engines of R replicas: seconds at R 4096): the process ends within 1 s of the
# signal, exit 130, saying it stopped during set-up, and leaves nothing behind: no run
# folder, no lock, no `latest`, no runs/ folder it made. A signal that lands after the
# set-up stops or finishes the step in progress and writes a checkpoint
# (poprun_step_signal_test.sh times it): such a row is shown, exit 130 checked, and not
# timed. Each signal must land in the set-up at least once.
#
#   tests/train/poprun_setup_signal_test.sh [--replicas R] [--points "0.05 0.2 ..."]
#
# Prints a row per (signal, point): seconds after the start the signal was sent, exit
# code, seconds from the signal to the exit, and the line poprun printed. Needs poprun on
# PATH and POPKIT_SOURCE_DIR (as under ctest).
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
replicas=4096
points="0.1 0.25 0.5"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --replicas) replicas="$2"; shift 2 ;;
    --points) points="$2"; shift 2 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
done
config="$POPKIT_SOURCE_DIR/examples/quick.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
echo "| signal | sent after (s) | exit | signal to exit (s) | poprun said |"
echo "|---|---:|---:|---:|---|"
for sig in TERM INT; do
  in_setup=0
  for point in $points; do
    dir="$work/$sig-$point"
    mkdir -p "$dir" && cd "$dir" || exit 1
    poprun train "$config" --set replication.factor="$replicas" \
      --set data.synthetic_train=$((replicas * 32)) --set data.synthetic_test=$((replicas * 8)) \
      --steps 1000000 -q >out 2>err &
    pid=$!
    # The points count from when poprun catches SIGINT and SIGTERM (SigCgt): before its
    # main runs (the loader; a sanitizer's start-up, 0.1-0.25 s under AddressSanitizer),
    # a signal's default action ends it, exit 128 + the signal, with nothing written.
    for _ in $(seq 1000); do
      caught=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
      [ -n "$caught" ] && (((16#$caught & 16#4002) == 16#4002)) && break
      sleep 0.002
    done
    start=$(now)
    sleep "$point"
    sent=$(now)
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    took=$(awk -v a="$sent" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
    after=$(awk -v a="$start" -v b="$sent" 'BEGIN { printf "%.2f", b - a }')
    said=$(grep -m1 "^poprun: stopped" err)
    echo "| SIG$sig | $after | $rc | $took | ${said:-$(tail -c 200 err)} |"
    [ "$rc" = 130 ] || fail "SIG$sig at $point s: exit $rc, want 130; stderr: $(cat err)"
    if grep -q "during set-up" err; then
      in_setup=$((in_setup + 1))
      awk -v t="$took" 'BEGIN { exit !(t <= 1.0) }' || fail "SIG$sig at $point s: exit took $took s"
      # Nothing of the run is left: the folders it made were removed, lock and all.
      left=$(find "$dir" -mindepth 1 ! -name out ! -name err)
      [ -z "$left" ] || fail "SIG$sig at $point s: left $left"
    elif [ -n "$said" ]; then
      [ -L "$dir/runs/quick/latest" ] || fail "SIG$sig at $point s: a stopped run has no latest"
    fi
  done
  [ "$in_setup" -gt 0 ] || fail "SIG$sig: no point of '$points' s landed in the set-up"
done
finish "poprun signals during set-up"
