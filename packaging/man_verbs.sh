#!/usr/bin/env bash
# Writes a help2man include for TOOL: each verb's --help as a VERBS subsection, and SEE
# ALSO, so the man page says everything `TOOL VERB --help` says and cannot drift from it.
# Usage: man_verbs.sh OUTPUT.h2m BINARY VERB...
set -euo pipefail
output=$1
binary=$2
shift 2
exec >"$output"
echo "[VERBS]"
for verb in "$@"; do
  echo ".SS \"$verb\""
  echo ".nf"
  # Lines starting with . or ' are roff requests: escape them.
  "$binary" "$verb" --help | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
  echo ".fi"
done
cat <<'TEXT'
[FILES]
.TP
.I ~/.cache/popkit/data
the datasets (MNIST, Fashion-MNIST), as popkit-fetch-data leaves them; data.dir in a
config or $POPKIT_DATA_DIR put them elsewhere
.TP
.I /usr/share/popkit/examples, /usr/share/popkit/schemas
example configs, and the JSON Schemas of the config, plan and run files

[SEE ALSO]
popplan(1), poprun(1), popreport(1), popkit-fetch-data; /usr/share/doc/popkit/README.md and /usr/share/doc/popkit/docs/
(concepts.md first)
TEXT
