#!/usr/bin/env bash
# Refreshes the documentation from a build, as a golden-file update does: the output of
# every command transcript in README.md and docs/*.md, the images they draw
# (tests/docs/transcripts.py update), and docs/config.md from the config schema. Run it
# after changing what a tool prints, then review the diff: a changed figure should be
# one you meant to change.
#   bash scripts/update_docs.sh [--build DIR] [PAGE...]    (default: build/ci, every page)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build/ci
if [ "${1:-}" = --build ]; then
  build=$(cd "$2" && pwd)
  shift 2
fi
[ -x "$build/cli/popplan" ] || { echo "no tools in $build/cli: build first (cmake --build --preset ci)" >&2; exit 2; }
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=("$root/README.md" "$root"/docs/*.md)
/usr/bin/python3 "$root/scripts/config_reference.py" --write "$root/docs/config.md"
PATH="$build/cli:$PATH" POPKIT_SOURCE_DIR=$root \
  /usr/bin/python3 "$root/tests/docs/transcripts.py" update "${pages[@]}"
