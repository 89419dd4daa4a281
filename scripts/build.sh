#!/usr/bin/env bash
# Configures and builds popkit with a CMake preset (default: release). Idempotent:
# an up-to-date build does nothing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
preset=${1:-release}
say() { printf '[build] %s\n' "$*"; }
cd "$root"
if [ ! -f "build/$preset/CMakeCache.txt" ]; then
  say "configuring (preset $preset)"
  cmake --preset "$preset" >/dev/null
fi
say "building (preset $preset) in build/$preset"
cmake --build --preset "$preset"
