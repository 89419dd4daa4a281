#!/usr/bin/env bash
# The test command: installs what is missing, builds (release, warnings as errors), and
# fetches the data, runs the whole test suite with CTest, ending in CTest's summary line.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { printf '[test] %s\n' "$*"; }
say "step 1/4: dependencies"
bash "$here/install_deps.sh"
say "step 2/4: data (the real-data tests read it)"
bash "$here/fetch_data.sh"
say "step 3/4: build"
bash "$here/build.sh" ci
say "step 4/4: ctest"
cd "$here/.."
ctest --preset ci
