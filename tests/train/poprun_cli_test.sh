#!/usr/bin/env bash
# poprun as a user runs it: train and eval, exit codes (0 ok, 1 run-time failure, 2 invalid
# config), errors that name the file and what is wrong, checkpoints numpy can read.
set -uo pipefail
. "$POPKIT_SOURCE_DIR/tests/cli/lib.sh"
config="$POPKIT_SOURCE_DIR/tests/train/data/tiny.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1


help=$(poprun --help)
grep -q "train" <<<"$help" && grep -q "eval" <<<"$help" || fail "--help does not list train and eval: $help"

# Train: summary on stdout, plain progress lines on stderr (not a terminal).
out=$(poprun train "$config" --steps 3 --out r/run.json 2>err.txt)
rc=$?
[ "$rc" = 0 ] || fail "train exited $rc: $(cat err.txt)"
grep -q "^trained tiny: 3 steps" <<<"$out" || fail "no summary line: $out"
grep -q "test accuracy " <<<"$out" || fail "no test accuracy: $out"
grep -q "peak memory/replica   planned 16.12 KiB, measured 16.12 KiB" <<<"$out" || fail "no memory line: $out"
grep -q "checkpoint            r/checkpoint-step3.safetensors" <<<"$out" || fail "no checkpoint line: $out"
grep -q "^epoch 1/1 step 3/3 100% " err.txt || fail "no progress line: $(cat err.txt)"
[ -f r/run.json ] || fail "no run file"
/usr/bin/python3 "$POPKIT_SOURCE_DIR/tests/reports/validate_run_file.py" \
  "$POPKIT_SOURCE_DIR/schemas/run.schema.json" r/run.json || fail "run file does not validate"

# --quiet: nothing on stderr.
poprun train "$config" --steps 2 --out q/run.json --quiet >/dev/null 2>quiet.txt
[ ! -s quiet.txt ] || fail "--quiet printed: $(cat quiet.txt)"

# Eval prints loss and accuracy.
out=$(poprun eval "$config" --checkpoint r/checkpoint-step3.safetensors --out e/eval.json)
[ $? = 0 ] || fail "eval failed"
grep -qE "^r/checkpoint-step3.safetensors on the 128 test samples: loss [0-9.]+, accuracy [0-9.]+% \([0-9]+/128\)$" <<<"$out" \
  || fail "eval output: $out"
[ -f e/eval.json ] || fail "eval --out wrote nothing"

# A checkpoint of another config (here: another seed) is refused, naming both configs'
# hashes and the key that differs, unless --force.
out=$(poprun eval "$config" --checkpoint r/checkpoint-step3.safetensors --set training.seed=8 2>&1)
[ $? = 1 ] || fail "eval of another config's checkpoint did not exit 1: $out"
grep -qE "^poprun eval: error: r/checkpoint-step3.safetensors was trained under config 'tiny' \(hash [0-9a-f]{16}\), not this one, 'tiny' \(hash [0-9a-f]{16}\), which differs in training.seed \(7 there, 8 here\): .* give --force to evaluate anyway$" <<<"$out" \
  || fail "eval refusal message: $out"
poprun eval "$config" --checkpoint r/checkpoint-step3.safetensors --set training.seed=8 --force >/dev/null \
  || fail "eval --force refused"

# numpy reads the checkpoint as safetensors: header length, JSON header, raw data.
/usr/bin/python3 - r/checkpoint-step3.safetensors <<'PY' || fail "numpy cannot read the checkpoint"
import json, struct, sys
import numpy as np
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
assert header["__metadata__"]["step"] == "3", header["__metadata__"]
t = header["fc1.weight"]
begin, end = t["data_offsets"]
w = np.frombuffer(data[8 + n + begin:8 + n + end], dtype="<f4").reshape(t["shape"])
assert w.shape == (64, 32) and np.isfinite(w).all() and w.std() > 0
PY

# Invalid config: diagnostics, exit 2.
expect 2 "training.micro_batch_size" -- poprun train "$config" --set training.micro_batch_size=0
expect 2 "" -- poprun train "$config" --steps 0
# A checkpoint that is not there is refused input (exit 2), said before any work.
expect 2 "poprun eval: error: nope.safetensors: no such file" -- poprun eval "$config" --checkpoint nope.safetensors
expect 2 "poprun train: error: nope.safetensors: no such file" -- poprun train "$config" --resume nope.safetensors
expect 2 "poprun train: error: no/such/run: no such file" -- poprun train "$config" --resume no/such/run
# Bad checkpoints: refused input (exit 2), the file named and what is wrong.
cp r/checkpoint-step3.safetensors tampered.safetensors
printf '\x55' | dd of=tampered.safetensors bs=1 seek=$(( $(stat -c %s tampered.safetensors) - 5 )) conv=notrunc status=none
expect 2 "poprun eval: error: tampered.safetensors: checksum mismatch" -- poprun eval "$config" --checkpoint tampered.safetensors
head -c 3000 r/checkpoint-step3.safetensors >truncated.safetensors
expect 2 "poprun train: error: truncated.safetensors: " -- poprun train "$config" --resume truncated.safetensors
expect 2 "poprun eval: error: r/checkpoint-step3.safetensors: does not match the model: tensor fc1.bias has shape [32], the model's fc1.bias is [16]" \
  -- poprun eval "$POPKIT_SOURCE_DIR/tests/train/data/narrow.yaml" --checkpoint r/checkpoint-step3.safetensors
# Files that are not regular files: refused at once (no hang on a FIFO, no endless
# read of /dev/zero); a checkpoint so is refused input (exit 2), a data file exit 1.
expect 2 "poprun eval: error: /dev/zero: is not a regular file (a character device); expected a safetensors checkpoint" \
  -- poprun eval "$config" --checkpoint /dev/zero
mkfifo fifo.safetensors
expect 2 "poprun train: error: fifo.safetensors: is not a regular file (a FIFO); expected a safetensors checkpoint" \
  -- timeout 60 poprun train "$config" --resume fifo.safetensors
expect 1 "poprun train: error: /dev/zero: is not a regular file (a character device); expected an IDX file (raw or .gz)" \
  -- poprun train "$config" --out z/run.json --set data.dataset=idx \
  --set data.train_images=/dev/zero --set data.train_labels=/dev/zero \
  --set data.test_images=/dev/zero --set data.test_labels=/dev/zero
# Weights as PyTorch would save them (no popkit metadata, so no checksum to pass) with
# one +Inf, or all NaN, in fc1.weight: eval and --init-from refuse them, exit 2.
for how in inf nan; do
  /usr/bin/python3 - r/checkpoint-step3.safetensors "$how.safetensors" "$how" <<'PY' || fail "cannot write $how.safetensors"
import json, struct, sys
src, dst, how = sys.argv[1:4]
data = open(src, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
out, blobs, offset = {}, [], 0
for name, t in sorted(header.items()):
    if name == "__metadata__" or ".adam_" in name:
        continue
    begin, end = t["data_offsets"]
    blob = bytearray(data[8 + n + begin:8 + n + end])
    if name == "fc1.weight":
        if how == "inf":
            blob[0:4] = struct.pack("<f", float("inf"))
        else:
            blob[:] = struct.pack("<f", float("nan")) * (len(blob) // 4)
    out[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [offset, offset + len(blob)]}
    offset += len(blob)
    blobs.append(bytes(blob))
text = json.dumps(out).encode()
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
done
expect 2 "poprun eval: error: inf.safetensors: tensor fc1.weight: 1 of 2048 values are not finite (NaN or Inf)" \
  -- poprun eval "$config" --checkpoint inf.safetensors
expect 2 "poprun eval: error: nan.safetensors: tensor fc1.weight: 2048 of 2048 values are not finite (NaN or Inf)" \
  -- poprun eval "$config" --checkpoint nan.safetensors
expect 2 "poprun train: error: nan.safetensors: tensor fc1.weight: 2048 of 2048 values are not finite (NaN or Inf)" \
  -- poprun train "$config" --steps 1 --init-from nan.safetensors --out n/run.json
# Unwritable output and missing data: exit 1 before training, nothing written.
touch blocker
expect 1 "poprun train: error: blocker: cannot create the run file folder" -- poprun train "$config" --out blocker/run.json
expect 1 "poprun train: error: blocker/ckpt: cannot create the checkpoint folder" -- poprun train "$config" --checkpoint-dir blocker/ckpt
expect 1 "missing-images.idx" -- poprun train "$config" --out m/run.json --set data.dataset=idx \
  --set data.train_images=missing-images.idx --set data.train_labels=missing-labels.idx \
  --set data.test_images=missing-images.idx --set data.test_labels=missing-labels.idx
# An empty test set: an error before training (train) or evaluating (eval), like an
# empty training set, not "0.00% (0/0)". Synthetic sets cannot be empty: invalid config.
/usr/bin/python3 - <<'PY' || fail "cannot write the IDX files"
import struct
def idx(stem, n):
    with open(stem + "-images.idx", "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 8, 8) + bytes(range(64)) * n)
    with open(stem + "-labels.idx", "wb") as f:
        f.write(struct.pack(">II", 2049, n) + bytes(i % 10 for i in range(n)))
idx("train", 64)
idx("empty-test", 0)
PY
idx_set=(--set data.dataset=idx --set data.train_images=train-images.idx
  --set data.train_labels=train-labels.idx --set data.test_images=empty-test-images.idx
  --set data.test_labels=empty-test-labels.idx)
expect 1 "poprun train: error: empty-test-images.idx: 0 test samples: evaluating the model needs at least one" \
  -- poprun train "$config" --steps 1 --out z/run.json "${idx_set[@]}"
[ ! -e z/checkpoint-step1.safetensors ] || fail "an empty test set was found only after training"
expect 1 "poprun eval: error: empty-test-images.idx: 0 test samples: evaluating the model needs at least one" \
  -- poprun eval "$config" --checkpoint r/checkpoint-step3.safetensors "${idx_set[@]}"
expect 2 "data.synthetic_test: must be >= 1, got 0" -- poprun train "$config" --set data.synthetic_test=0

# io_overlapped's two ways of moving data, on the benchmark's IO-heavy loop: the same
# weights bit for bit (the checkpoints' bytes); a way that does not exist is exit 2.
heavy="$POPKIT_SOURCE_DIR/bench/io_heavy.yaml"
for how in on off; do
  poprun train "$heavy" --steps 2 -q --set training.micro_batch_size=64 \
    --set execution.io_mode=io_overlapped --io-thread "$how" --out "io_$how/run.json" \
    >/dev/null 2>&1 || fail "train bench/io_heavy.yaml --io-thread $how"
done
cmp -s io_on/checkpoint-step2.safetensors io_off/checkpoint-step2.safetensors ||
  fail "--io-thread on and off give different checkpoints"
expect 2 "--io-thread: sometimes not in {auto,on,off}" -- poprun train "$config" --io-thread sometimes

finish "poprun cli"
