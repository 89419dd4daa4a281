#!/usr/bin/env bash
# Every example config trains on the synthetic dataset to a lower loss: the plan of each
# tutorial scenario runs in the engine, and measured memory equals planned memory in
# every phase of its run file.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for example in "$POPKIT_SOURCE_DIR"/examples/*.yaml; do
  name=$(basename "$example" .yaml)
  poprun train "$example" --set data.dataset=synthetic --steps 20 --quiet \
    --out "$tmp/$name/run.json" >"$tmp/$name.log" 2>&1 \
    || { cat "$tmp/$name.log"; echo "FAIL: poprun train $name"; exit 1; }
  /usr/bin/python3 - "$tmp/$name/run.json" "$name" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
name, loss = sys.argv[2], run["loss"]
assert len(loss) == 20, f"{name}: {len(loss)} steps, want 20"
assert loss[-1] < 0.5 * loss[0], f"{name}: loss {loss[0]:.4f} -> {loss[-1]:.4f} did not halve"
for phase in run["phases"]:
    for replica, measured in enumerate(phase["measured_memory"]):
        assert measured == phase["planned_memory"], \
            f"{name}: phase {phase['name']} replica {replica}: measured {measured} != planned {phase['planned_memory']}"
print(f"{name}: loss {loss[0]:.4f} -> {loss[-1]:.4f}, memory as planned in {len(run['phases'])} phases")
PY
done
