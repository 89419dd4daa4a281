#!/usr/bin/env bash
# A file given by mistake (the password file as a config, a run file or a calibration
# table) is refused without its contents in the message: a config is read only when its
# name ends in .yaml or .yml, a calibration table only when it ends in .csv, and a
# diagnostic shows a run file's lines only when its name says it is one (.json), as a
# config with a typo gets its line and a caret.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

printf 'root:x:0:0:hunter2 [\n' >secret
printf 'hunter2 {\n' >secret-json
check() {  # RC FILE -- COMMAND...: exits RC, names FILE's line, shows none of it
  local want_rc=$1 file=$2
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = "$want_rc" ] || fail "'$*' exited $rc, want $want_rc: $err"
  grep -q "hunter2" <<<"$err" && fail "'$*' printed the file's contents: $err"
  grep -qF "$file:1:" <<<"$err" || fail "'$*' does not name $file's line: $err"
}
# A config is not read unless its name says it is one: the tool's error (validate's
# report is its own, a diagnostic per file).
for cmd in "popplan validate" "popplan plan" "popplan tune --memory-per-replica 1GiB" "poprun train"; do
  out=$($cmd secret 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "$cmd secret exited $rc, want 2: $out"
  want="${cmd%% -*}: error: secret: is not a config file: a config's name ends in .yaml or .yml"
  [ "$cmd" = "popplan validate" ] && want="secret: error: is not a config file"
  grep -qF "$want" <<<"$out" || fail "$cmd secret: $out"
  grep -q hunter2 <<<"$out" && fail "$cmd secret printed the file's contents"
done
# A device profile that is no mapping (the password file named .yaml) is refused unquoted.
cp secret profile.yaml
out=$(popplan plan "$POPKIT_SOURCE_DIR/examples/quick.yaml" --set device.profile=profile.yaml 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "a profile that is no mapping: exit $rc, want 2: $out"
grep -qF "profile.yaml: error: a device profile is a mapping" <<<"$out" || fail "profile.yaml: $out"
grep -q hunter2 <<<"$out" && fail "a profile that is no mapping printed the file's contents: $out"
check 2 secret-json -- popreport memory secret-json
check 2 secret-json -- popreport throughput secret-json
# Nor is a calibration table: its values would show in the messages.
printf 'name,config,samples_per_second\nhunter2,x.yaml,hunter2\n' >secret-values
for table in secret secret-values; do
  out=$(popplan calibrate --table $table --no-fit 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "calibrate --table $table exited $rc, want 2: $out"
  grep -qF "$table: error: is not a calibration table: a table's name ends in .csv; it was not read" \
    <<<"$out" || fail "calibrate --table $table: $out"
  grep -q hunter2 <<<"$out" && fail "calibrate --table $table printed the file's contents"
done

# Named as what it is read as, the same file's line is shown with a caret.
cp secret secret.yaml
err=$(popplan validate secret.yaml 2>&1)
grep -qF "root:x:0:0:hunter2 [" <<<"$err" || fail "a .yaml config's line is not shown: $err"
finish cli.file_contents
