#!/usr/bin/env bash
# The portable build runs on any x86-64 CPU: only the v3 and v4 kernel tables (their
# functions carry the .popkit_kernels_<table>_x86_64_v3/_v4 suffix given by
# cmake/kernel_levels.cmake) may use AVX registers. Disassembles poprun and checks
# every other function: an inline function the linker took from a v4 object for the
# whole program, say, would show up here.
set -euo pipefail
binary=${1:?usage: portable_binary_test.sh POPRUN}
command -v objdump >/dev/null || { echo "FAIL: objdump (binutils) is not installed"; exit 1; }
objdump -d --no-show-raw-insn "$binary" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $2; next }
  /%[yz]mm[0-9]/ { if (fn ~ /\.popkit_kernels_[a-z0-9_]*_x86_64_v[34]>/) wide[fn] = 1; else bad[fn] = 1 }
  END {
    n_bad = 0; for (f in bad) { if (n_bad < 20) print "FAIL: AVX outside the v3/v4 kernels: " f; n_bad++ }
    n_wide = 0; for (f in wide) n_wide++
    # The check must be able to fail: the v3/v4 kernels do use AVX.
    if (n_wide == 0) { print "FAIL: no function of the v3/v4 kernels uses AVX: is the disassembly read right?"; exit 1 }
    if (n_bad > 0) { print n_bad " function(s)"; exit 1 }
    print "portable binary: ok (" n_wide " functions of the v3/v4 kernels use AVX, no other)"
  }'
