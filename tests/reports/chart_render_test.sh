#!/usr/bin/env bash
# --chart writes an SVG that is well-formed XML and that a real renderer (rsvg-convert,
# Debian's librsvg2-bin) draws at the declared size, and not as a blank page.
set -euo pipefail
data="$POPKIT_SOURCE_DIR/tests/data/reports"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$data"
popreport memory base.json --chart "$work/run.svg" >/dev/null
popreport throughput base.json nosharding.json --chart "$work/two.svg" >/dev/null
popreport throughput base.json --chart "$work/throughput.svg" >/dev/null
popreport compare base.json nosharding.json quick_plan.json --chart "$work/compare.svg" >/dev/null

svg_height() {  # the height the SVG declares
  /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as ET; print(ET.parse(sys.argv[1]).getroot().get("height"))' "$1"
}

check() {  # check SVG WIDTH HEIGHT
  local svg=$1 width=$2 height=$3
  /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); assert r.tag == "{http://www.w3.org/2000/svg}svg", r.tag' "$svg"
  rsvg-convert --format png --output "$svg.png" "$svg"
  /usr/bin/python3 - "$svg.png" "$width" "$height" <<'PY'
import struct, sys, zlib
path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (want_w, want_h), f"PNG is {w}x{h}, want {want_w}x{want_h}"
# Non-empty: decode the image data and count pixels that are not the white background.
pos, idat = 8, b""
bit_depth, color_type = data[24], data[25]
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IDAT":
        idat += data[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
assert bit_depth == 8 and color_type in (2, 6), f"unexpected PNG format {bit_depth}/{color_type}"
channels = 4 if color_type == 6 else 3
stride = w * channels + 1
# Filtered bytes: a row of pure white (filter 0) is 255s; any other byte means ink or a
# filter that encodes change, so count rows that are not plain white.
inked = sum(1 for y in range(h) if raw[y * stride] != 0 or any(b != 255 for b in raw[y * stride + 1:(y + 1) * stride]))
assert inked > h // 4, f"only {inked} of {h} rows have anything drawn"
print(f"{path}: {w}x{h}, {inked} rows drawn")
PY
}
check "$work/run.svg" 800 "$(svg_height "$work/run.svg")"
check "$work/two.svg" 800 "$(svg_height "$work/two.svg")"
check "$work/compare.svg" 800 "$(svg_height "$work/compare.svg")"
# Each verb its own chart.
! cmp -s "$work/run.svg" "$work/throughput.svg" || { echo "memory and throughput charts are the same" >&2; exit 1; }
echo "chart render: ok"
