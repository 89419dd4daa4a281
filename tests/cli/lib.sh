# What the CLI test scripts share (sourced): failures are counted, not fatal, so one run
# reports every broken case; `finish NAME` ends the script with the count.
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect RC STDERR_SUBSTRING -- COMMAND...: the command exits RC and its stderr contains
# the substring (any stderr when it is empty).
expect() {
  local want_rc=$1 want_err=$2
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" != "$want_rc" ]; then
    fail "'$*' exited $rc, want $want_rc; stderr: $err"
  elif [ -n "$want_err" ] && ! grep -qF -- "$want_err" <<<"$err"; then
    fail "'$*' stderr is '$err', want it to contain '$want_err'"
  fi
}

finish() {
  if [ "$failures" != 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "$1: ok"
}
