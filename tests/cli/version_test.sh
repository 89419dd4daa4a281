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
echo "version and help: ok ($want)"
