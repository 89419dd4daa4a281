#!/usr/bin/env bash
# popplan groups: the Group | Replicas tables of the replication chapter, and the rules.
set -euo pipefail
fail() { echo "FAIL: $*"; exit 1; }

want=$'Group | Replicas\n------+-------------\n    0 | 0, 4, 8, 12\n    1 | 1, 5, 9, 13\n    2 | 2, 6, 10, 14\n    3 | 3, 7, 11, 15'
got=$(popplan groups --factor 16 --group-size 4 --stride 4)
[ "$got" = "$want" ] || fail "(4,4) table:\n$got"

want=$'Group | Replicas\n------+---------------\n    0 | 0, 1, 2, 3\n    1 | 4, 5, 6, 7\n    2 | 8, 9, 10, 11\n    3 | 12, 13, 14, 15'
got=$(popplan groups --factor 16 --group-size 4)
[ "$got" = "$want" ] || fail "(4,1) table:\n$got"

[ "$(popplan groups --factor 16 --group-size 1 | tail -n +3 | wc -l)" = 16 ] || fail "(1,1) is not 16 groups"

got=$(popplan groups --factor 4 --group-size 2 --stride 2 --format json | tr -d ' \n')
[ "$got" = '{"factor":4,"group_size":2,"groups":[[0,2],[1,3]],"n_groups":2,"stride":2}' ] || fail "json: $got"

set +e
err=$(popplan groups --factor 16 --group-size 4 --stride 3 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || fail "a bad grouping exited $rc, want 2"
[ "$err" = "popplan groups: error: --stride 3 x --group-size 4 = 12, but stride != 1 needs stride x group_size == factor (16)" ] \
  || fail "message: $err"
# A product that would overflow is refused without computing it.
set +e
err=$(popplan groups --factor 16 --group-size 2 --stride 9223372036854775807 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || fail "a stride of 2^63 - 1 exited $rc, want 2"
[ "$err" = "popplan groups: error: --stride 9223372036854775807 x --group-size 2 is more than --factor 16, but stride != 1 needs stride x group_size == factor" ] \
  || fail "message: $err"

# A table is bounded as a config is: a factor past the configs' limit is refused at once
# (it allocated until std::bad_alloc). The address space is capped at 4 GB so that a
# regression fails fast, except in a sanitized build: AddressSanitizer reserves terabytes
# of address space for its shadow memory at start and dies under the cap (its allocator
# aborts on a huge allocation instead, which fails the same check).
limit=4000000
[ -z "${POPKIT_SANITIZE:-}" ] || limit=unlimited
set +e
err=$(ulimit -v "$limit"; timeout 10 popplan groups --factor 1099511627776 --group-size 1 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 2 ] || fail "--factor 2^40 exited $rc, want 2: $err"
[ "$err" = "popplan groups: error: --factor 1099511627776 is more than 65536, the most replicas a config may have" ] \
  || fail "--factor 2^40: $err"
[ "$(popplan groups --factor 65536 --group-size 1 | tail -n +3 | wc -l)" = 65536 ] || fail "R 65536"

got=$(popplan groups "$POPKIT_SOURCE_DIR/examples/replica_groups.yaml")
grep -qF "Grouping orthogonal: group_size 4, stride 4 over 16 replicas" <<<"$got" || fail "config groupings"
# --chart draws the groupings (and a plan) as SVG that a real renderer draws; a picture
# too large to read is refused with exit 1 and leaves no file.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
popplan groups "$POPKIT_SOURCE_DIR/examples/replica_groups.yaml" --chart "$tmp/groups.svg" >/dev/null
grep -q ">g15</text>" "$tmp/groups.svg" || fail "the chart has no box of group 15 (grouping single)"
popplan plan "$POPKIT_SOURCE_DIR/examples/mnist_pipelined.yaml" -q --chart "$tmp/pipeline.svg"
grep -q ">device 5: replica 1, stage 2</text>" "$tmp/pipeline.svg" || fail "the pipeline chart lacks device 5"
if command -v rsvg-convert >/dev/null; then
  for svg in "$tmp"/*.svg; do
    rsvg-convert --format png --output "$svg.png" "$svg" || fail "rsvg-convert cannot draw $svg"
  done
fi
set +e
err=$(popplan groups --factor 128 --group-size 1 --chart "$tmp/big.svg" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 2 ] || fail "--chart of 128 replicas exited $rc, want 2 (refused input)"
grep -qF "at most 64" <<<"$err" || fail "--chart of 128 replicas: $err"
[ ! -e "$tmp/big.svg" ] || fail "a refused chart left a file"
# A chart is SVG: a file named otherwise (a .png that would hold SVG) is refused, by
# every tool that draws one.
for cmd in "popplan groups --factor 4" "popplan plan $POPKIT_SOURCE_DIR/examples/mnist.yaml -q" \
  "popreport memory $POPKIT_SOURCE_DIR/tests/data/reports/quick_plan.json"; do
  set +e
  err=$($cmd --chart "$tmp/chart.png" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$cmd --chart chart.png exited $rc, want 2"
  grep -qF "chart.png: charts are drawn as SVG: name the file .svg" <<<"$err" || fail "$cmd --chart chart.png: $err"
done
[ ! -e "$tmp/chart.png" ] || fail "a refused chart left a file"
echo "popplan groups: ok"
