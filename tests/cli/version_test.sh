#!/usr/bin/env bash
# Every tool answers --version with the same version, and --help with its usage and
# the exit codes; an unknown flag is invalid input (exit 2).
set -euo pipefail
want=$(sed -n 's/^project(popkit VERSION \([0-9.]*\).*/\1/p' "$POPKIT_SOURCE_DIR/CMakeLists.txt")
[ -n "$want" ] || { echo "cannot read the version from CMakeLists.txt"; exit 1; }
for tool in popplan poprun popreport; do
  out=$("$tool" --version)
  case "$out" in
    "$tool $want "*) ;;
    *) echo "FAIL: $tool --version printed '$out', want '$tool $want ...'"; exit 1 ;;
  esac
  help=$("$tool" --help)
  grep -q "Exit codes: 0 success, 1 failure at run time, 2 invalid input." <<<"$help" \
    || { echo "FAIL: $tool --help does not document the exit codes"; exit 1; }
  grep -q "^$tool: " <<<"$help" || { echo "FAIL: $tool --help does not name the tool"; exit 1; }
  set +e
  "$tool" --no-such-flag >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "FAIL: $tool --no-such-flag exited $rc, want 2"; exit 1; }
done

# poprun names the kernel level it runs (engine/kernels): the best this CPU runs, or the
# one POPKIT_CPU_LEVEL forces; a level it cannot use is an error, not a crash.
out=$(poprun --version)
grep -Eq '^kernels [a-z0-9-]+ \(.*\), chosen from cpuid; built: ' <<<"$out" \
  || { echo "FAIL: poprun --version names no kernel level: '$out'"; exit 1; }
lowest=$(sed -n 's/.*; built: \([^,]*\).*/\1/p' <<<"$out")
out=$(POPKIT_CPU_LEVEL="$lowest" poprun --version)
grep -q "^kernels $lowest (.*), forced by POPKIT_CPU_LEVEL" <<<"$out" \
  || { echo "FAIL: POPKIT_CPU_LEVEL=$lowest: '$out'"; exit 1; }
out=$(POPKIT_CPU_LEVEL=no-such-level poprun --version)
grep -q "^kernels: error: POPKIT_CPU_LEVEL=no-such-level: not a level of this build" <<<"$out" \
  || { echo "FAIL: POPKIT_CPU_LEVEL=no-such-level: '$out'"; exit 1; }
set +e
err=$(POPKIT_CPU_LEVEL=no-such-level poprun train "$POPKIT_SOURCE_DIR/examples/quick.yaml" \
  --steps 1 -o "$(mktemp -d)/run.json" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "POPKIT_CPU_LEVEL=no-such-level: not a level of this build" <<<"$err" \
  || { echo "FAIL: poprun train with POPKIT_CPU_LEVEL=no-such-level exited $rc: $err"; exit 1; }
echo "version and help: ok ($want)"
