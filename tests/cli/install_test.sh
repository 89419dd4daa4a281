#!/usr/bin/env bash
# `cmake --install` into a temporary prefix gives working tools, the schemas and the
# examples, the data fetcher the tools' messages name (popkit-fetch-data, with its
# checksums), bash completion, README.md with docs/ (which --help names), the copyright
# file and (with help2man) man pages.
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
for profile in cpu ipu-mk1 ipu-mk2; do
  [ -f "$prefix/share/popkit/profiles/$profile.yaml" ] || { echo "FAIL: profile $profile not installed"; exit 1; }
done
# The installed popplan finds its profiles beside it (bin/../share/popkit/profiles), ahead
# of the source tree: an edited installed profile is the one it prices with.
sed -i 's/^name: ipu-mk2$/name: ipu-mk2-installed/' "$prefix/share/popkit/profiles/ipu-mk2.yaml"
planned=$(cd "$prefix" && "$prefix/bin/popplan" plan "$prefix/share/popkit/examples/mnist.yaml")
grep -q "samples/s on ipu-mk2-installed$" <<<"$planned" \
  || { echo "FAIL: the installed popplan does not read its installed profiles: $planned"; exit 1; }
[ -x "$prefix/bin/popkit-fetch-data" ] || { echo "FAIL: popkit-fetch-data not installed"; exit 1; }
[ -f "$prefix/share/popkit/fetch-data/data.sha256" ] || { echo "FAIL: data.sha256 not installed"; exit 1; }
[ -f "$prefix/share/popkit/fetch-data/mnist_to_idx.py" ] || { echo "FAIL: mnist_to_idx.py not installed"; exit 1; }
for tool in popplan poprun popreport; do
  [ -f "$prefix/share/bash-completion/completions/$tool" ] || { echo "FAIL: no bash completion for $tool"; exit 1; }
  if command -v help2man >/dev/null; then
    [ -s "$prefix/share/man/man1/$tool.1" ] || { echo "FAIL: no man page for $tool"; exit 1; }
  fi
done
for page in README.md docs/concepts.md docs/config.md docs/images/phases.svg; do
  [ -f "$prefix/share/doc/popkit/$page" ] || { echo "FAIL: $page not installed"; exit 1; }
done
grep -q "^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" \
  "$prefix/share/doc/popkit/copyright" || { echo "FAIL: no copyright file"; exit 1; }
# popkit is Apache-2.0: the Files: * stanza says so and points at Debian's copy of the text.
grep -qzP "Files: \*\nCopyright: [^\n]*\nLicense: Apache-2.0\n" "$prefix/share/doc/popkit/copyright" \
  && grep -q "/usr/share/common-licenses/Apache-2.0" "$prefix/share/doc/popkit/copyright" \
  || { echo "FAIL: the copyright file does not license popkit under Apache-2.0"; exit 1; }
cmp -s "$POPKIT_SOURCE_DIR/LICENSE" /usr/share/common-licenses/Apache-2.0 \
  || { echo "FAIL: LICENSE is not the Apache-2.0 text"; exit 1; }
# The installed fetcher finds its checksums beside it: with MNIST already fetched it
# verifies and fetches nothing.
data=${POPKIT_DATA_DIR:-$HOME/.cache/popkit/data}
if [ -f "$data/mnist/train-images-idx3-ubyte" ] || [ -f "$data/mnist/train-images-idx3-ubyte.gz" ]; then
  fetched=$(POPKIT_DATA_DIR=$data "$prefix/bin/popkit-fetch-data" 2>&1 || true)
  grep -q "MNIST: present in .*, SHA-256 verified" <<<"$fetched" \
    || { echo "FAIL: the installed popkit-fetch-data does not verify $data/mnist: $fetched"; exit 1; }
fi
echo "install: ok ($out)"
