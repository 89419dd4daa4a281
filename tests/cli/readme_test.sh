#!/usr/bin/env bash
# README quotes real output: each ```-block that starts with `$ popplan ...` and quotes
# the whole output (no "..." line) is run from the source folder and must print exactly
# what README shows, exit code included (`$ echo $?` and the line after it).
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
cd "$POPKIT_SOURCE_DIR" || exit 1
blocks=$(/usr/bin/python3 - README.md <<'PY'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
out = []
for block in re.findall(r"```\n(\$ popplan .*?)```", text, re.S):
    lines = block.rstrip("\n").split("\n")
    if "..." in lines:
        continue
    command = lines[0][2:]
    rest = lines[1:]
    rc = None
    if len(rest) >= 2 and rest[-2] == "$ echo $?":
        rc = int(rest[-1])
        rest = rest[:-2]
    out.append({"command": command, "output": "\n".join(rest), "rc": rc})
print(json.dumps(out))
PY
)
n=$(/usr/bin/python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$blocks")
[ "$n" -ge 2 ] || fail "README quotes $n whole outputs of popplan, want the validate and groups examples"
for ((i = 0; i < n; i++)); do
  command=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[int(sys.argv[2])]["command"])' "$blocks" "$i")
  want=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[int(sys.argv[2])]["output"])' "$blocks" "$i")
  want_rc=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[int(sys.argv[2])]["rc"])' "$blocks" "$i")
  read -r -a argv <<<"$command"
  got=$("${argv[@]}" 2>&1)
  rc=$?
  [ "$got" = "$want" ] || fail "README's '$command' output differs:
--- README
$want
--- actual
$got"
  [ "$want_rc" = None ] || [ "$rc" = "$want_rc" ] || fail "'$command' exited $rc, README says $want_rc"
done
finish readme
