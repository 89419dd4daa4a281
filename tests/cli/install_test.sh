#!/usr/bin/env bash
# `cmake --install` into a temporary prefix gives working tools, the schemas and the
# examples.
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for tool in popplan poprun popreport; do
  [ -x "$prefix/bin/$tool" ] || { echo "FAIL: $prefix/bin/$tool not installed"; exit 1; }
done
out=$("$prefix/bin/popplan" --version)
want=$(popplan --version)
[ "$out" = "$want" ] || { echo "FAIL: installed popplan --version '$out' != '$want'"; exit 1; }
[ -d "$prefix/share/popkit/schemas" ] || { echo "FAIL: schemas not installed"; exit 1; }
[ -d "$prefix/share/popkit/examples" ] || { echo "FAIL: examples not installed"; exit 1; }
echo "install: ok ($out)"
