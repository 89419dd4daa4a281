#!/usr/bin/env bash
# Every example config trains to a lower loss, on the synthetic dataset (a language
# model on its text): the plan of each tutorial scenario runs in the engine, and
# measured memory equals planned memory in every phase of its run file. The MLPs halve
# their loss in 20 steps; a language model starts at ln 256 = 5.55 nats a byte and
# falls towards the bytes' unigram entropy (3.31 for the fortunes text) first.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for example in "$POPKIT_SOURCE_DIR"/examples/*.yaml; do
  name=$(basename "$example" .yaml)
  # GPT-2 sizes are planned for IPUs: their streaming memory alone is TiBs of host memory.
  [[ $name == gpt2_* ]] && continue
  data=(--set data.dataset=synthetic) kind=mlp
  # A language model on its text; its final evaluation on 1% of the text, not 10%
  # (248,448 positions of gpt_tiny: minutes under a sanitizer).
  grep -q "dataset: text" "$example" && data=(--set data.validation_fraction=0.01) kind=text
  poprun train "$example" "${data[@]}" --steps 20 --quiet \
    --out "$tmp/$name/run.json" >"$tmp/$name.log" 2>&1 \
    || { cat "$tmp/$name.log"; echo "FAIL: poprun train $name"; exit 1; }
  /usr/bin/python3 - "$tmp/$name/run.json" "$name" "$kind" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
name, loss = sys.argv[2], run["loss"]
assert len(loss) == 20, f"{name}: {len(loss)} steps, want 20"
fall = 0.65 if sys.argv[3] == "text" else 0.5
assert loss[-1] < fall * loss[0], f"{name}: loss {loss[0]:.4f} -> {loss[-1]:.4f}, not below {fall} of it"
for phase in run["phases"]:
    for replica, measured in enumerate(phase["measured_memory"]):
        assert measured == phase["planned_memory"], \
            f"{name}: phase {phase['name']} replica {replica}: measured {measured} != planned {phase['planned_memory']}"
print(f"{name}: loss {loss[0]:.4f} -> {loss[-1]:.4f}, memory as planned in {len(run['phases'])} phases")
PY
done
