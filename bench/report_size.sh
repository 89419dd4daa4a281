#!/usr/bin/env bash
# How long `popreport throughput` takes, and its peak RSS, on a run file near the largest
# it reads (512 MiB): a real run of examples/quick.yaml (3 steps) whose run file is then
# given STEPS steps' losses and step times, as a run of that many steps writes them.
# Prints the file's size, the seconds and the peak RSS, a row per try.
#
#   bench/report_size.sh [--build DIR] [--steps N] [--tries N]
#
#   --steps   the steps the file holds (default 10,500,000: about 490 MB)
#
# Needs a release build (default build/ci), GNU time (/usr/bin/time) and about 2 GB of
# scratch disk.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build="$root/build/ci"
steps=10500000
tries=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --tries) tries="$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) bench_unknown "$1" ;;
  esac
done
bench_need "cmake --preset ci && cmake --build --preset ci" "$build/cli/poprun" "$build/cli/popreport"
[[ -x /usr/bin/time ]] || bench_fail "needs GNU time (apt-get install time)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$build/cli/poprun" train "$root/examples/quick.yaml" --steps 3 --run-dir "$work/run" -q
# The file as poprun writes it (two-space indent), each step a loss and a time.
python3 - "$work/run/run.json" "$work/big.json" "$steps" <<'PY'
import json, random, sys
r = json.load(open(sys.argv[1]))
n = int(sys.argv[3])
r["loss"], r["step_seconds"] = ["LOSS"], ["TIME"]
head, rest = json.dumps(r, indent=2).split('"LOSS"')
middle, tail = rest.split('"TIME"')
random.seed(1)
losses = ",\n    ".join(repr(1 + random.random()) for _ in range(1000))
times = ",\n    ".join(repr(random.random() / 100) for _ in range(1000))
with open(sys.argv[2], "w") as f:
    for text, block in ((head, losses), (middle, times)):
        f.write(text)
        f.write(",\n    ".join([block] * (n // 1000)))
    f.write(tail)
PY
size=$(stat -c %s "$work/big.json")
echo "| try | file bytes | steps | seconds | peak RSS (MB) |"
echo "|---|---|---|---|---|"
for t in $(seq "$tries"); do
  /usr/bin/time -f "%e %M" -o "$work/time" "$build/cli/popreport" throughput "$work/big.json" >/dev/null
  read -r seconds kb <"$work/time"
  echo "| $t | $size | $((steps / 1000 * 1000)) | $seconds | $((kb / 1024)) |"
done
