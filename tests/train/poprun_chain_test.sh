#!/usr/bin/env bash
# The three tools chained as a user chains them on examples/quick.yaml (synthetic data):
# popplan plan -> poprun train --steps -> popreport memory and compare.
set -euo pipefail
example="$POPKIT_SOURCE_DIR/examples/quick.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

popplan plan "$example" --format json -o plan.json
poprun train "$example" --steps 4 --out run.json >train.txt 2>/dev/null
grep -q "^trained quick: 4 steps" train.txt
popreport memory run.json >memory.txt
grep -qi "measured" memory.txt
popreport compare plan.json run.json --names plan,run >compare.txt
grep -q "plan" compare.txt
grep -q "run" compare.txt
echo "popplan -> poprun -> popreport: ok"
