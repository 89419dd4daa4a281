"""popkit's layer_norm is torch.nn.LayerNorm: an MNIST MLP with a layer norm after each
hidden layer, trained 10 Adam steps by poprun and by its PyTorch twin (popkit_torch.py)
from one init on the same batches, ends with every parameter within 1e-4 of its largest
magnitude (float rounding only: the sums run in another order).

The init: normal weights (std 0.05) and biases, the layer norms' scale 1 + normal(0.1) and
shift normal(0.1) (not 1 and 0, so that their use in the forward shows), written by this
test and given to poprun with --init-from. Run by ctest (torch.layer_norm) with popplan
and poprun on PATH and MNIST where scripts/fetch_data.sh puts it.
"""
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import popkit_torch as pt  # noqa: E402

STEPS = 10
TOLERANCE = 1e-4

CONFIG = """\
version: 1
name: layer-norm-torch
model:
  input_shape: [28, 28]
  layers:
    - {name: fc1, out_features: 64, activation: gelu}
    - {name: ln1, type: layer_norm}
    - {name: fc2, out_features: 32, activation: relu}
    - {name: ln2, type: layer_norm, eps: 1.0e-3}
    - {name: fc3, out_features: 10}
replication: {factor: 1}
training:
  micro_batch_size: 16
  gradient_accumulation: 2
  optimizer: {type: adam, lr: 1.0e-3, bias_correction: true}
data: {dataset: mnist, shuffle: false, normalize_mean: 0.25, normalize_std: 0.35}
"""


def initial_arrays(twin, seed=5):
    rng = np.random.default_rng(seed)
    out = {}
    for name, value in twin.arrays().items():
        if name.endswith(".scale"):
            out[name] = 1.0 + 0.1 * rng.standard_normal(value.shape)
        elif name.endswith(".shift"):
            out[name] = 0.1 * rng.standard_normal(value.shape)
        else:
            out[name] = 0.05 * rng.standard_normal(value.shape)
    return {k: v.astype(np.float32) for k, v in out.items()}


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        run = pt.PopkitRun(work, CONFIG, STEPS, initial_arrays)
        twin, plan = run.twin, run.plan
        images, labels = pt.mnist_train()
        x = pt.normalize(images[:STEPS * plan["global_batch_size"]], 0.25, 0.35)  # CONFIG's
        pt.train(twin, pt.adam_for(twin, plan["optimizer"]), x, labels, plan["global_batch_size"],
                 STEPS)
        want = twin.arrays()

        moved, _ = pt.largest_relative_difference(run.init, want)
        worst, where = pt.largest_relative_difference(run.params, want)
        print(f"after {STEPS} steps: popkit vs torch, largest difference relative to the "
              f"parameter's scale {worst:.3g} ({where}); training moved them {moved:.3g}")
        ok = worst <= TOLERANCE and moved > 100 * TOLERANCE
        print("ok" if ok else f"FAILED: tolerance {TOLERANCE}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
