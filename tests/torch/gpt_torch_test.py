"""popkit's GPT is a PyTorch GPT: a 2-block GPT on the fortunes text, with its head tied
to the token table and untied, trained 10 Adam steps (2 micro-batches a step) by poprun
and by its PyTorch twin (popkit_torch.py) from one init on the same windows, ends with
every parameter within 1e-4 of its largest magnitude, and every step's loss within 1e-4
of torch's (relative): float rounding only, the sums run in another order.

The init is popkit_torch.gpt_init's, given to poprun with --init-from: its weights make
the MLP's pre-activations of order 1, so that the GELU's form shows (torch's erf GELU
fails this test). A tied head has no tensor of its own (the checkpoint stores the table
once), so the init names none.

The shapes are awkward on purpose: 3 heads of 16, positions (40) beyond the sequence (32),
a hidden width of 136. Run by ctest (torch.gpt) with popplan and poprun on PATH and the
fortunes text where scripts/fetch_data.sh puts it.
"""
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import popkit_torch as pt  # noqa: E402

STEPS = 10
TOLERANCE = 1e-4

CONFIG = """\
version: 1
name: gpt-torch
model:
  layers:
    - {{name: wte, type: embedding, vocabulary: 256, positions: 40, width: 48}}
    - {{name: h0, type: decoder_block, heads: 3, hidden: 136}}
    - {{name: h1, type: decoder_block, heads: 3, hidden: 136}}
    - {{name: ln_f, type: layer_norm}}
    - {{name: head, type: lm_head, vocabulary: 256{tie}}}
execution: {{mode: standard}}
replication: {{factor: 1}}
training:
  micro_batch_size: 4
  gradient_accumulation: 2
  seed: 7
  optimizer: {{type: adam, lr: 3.0e-3, bias_correction: true}}
data: {{dataset: text, path: text/fortunes.txt, sequence_length: 32, shuffle: false}}
"""


def relative(got, want):
    return abs(got - want) / max(abs(want), 1e-30)


def compare(work, tie):
    """Trains both; the largest parameter and loss differences, and how far training
    moved the parameters."""
    run = pt.PopkitRun(work, CONFIG.format(tie=", tied_to: wte" if tie else ""), STEPS,
                       pt.gpt_init)
    twin, plan = run.twin, run.plan
    g = plan["global_batch_size"]
    split = pt.text_training_split(os.path.join(pt.popkit_data_dir(), "text", "fortunes.txt"))
    x, y = pt.text_windows(split, plan["positions"], STEPS * g, plan["seed"])
    losses = pt.train(twin, pt.adam_for(twin, plan["optimizer"]), x, y, g, STEPS)
    want = twin.arrays()

    if set(run.params) != set(want):
        raise RuntimeError(f"popkit's checkpoint holds {sorted(run.params)}, the twin "
                           f"{sorted(want)}")
    if len(run.losses) != STEPS:
        raise RuntimeError(f"popkit's run file holds {len(run.losses)} losses, not {STEPS}")
    moved, _ = pt.largest_relative_difference(run.init, want)
    worst, where = pt.largest_relative_difference(run.params, want)
    loss_worst = max(relative(p, t) for p, t in zip(run.losses, losses))
    print(f"{'tied' if tie else 'untied'} head, after {STEPS} steps: parameters differ by "
          f"{worst:.3g} of their scale at most ({where}), training moved them {moved:.3g}; "
          f"losses {losses[0]:.4f} -> {losses[-1]:.4f}, popkit's differ by {loss_worst:.3g} "
          f"at most (relative)")
    return worst, loss_worst, moved


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ok = True
    for tie in (True, False):
        with tempfile.TemporaryDirectory() as work:
            worst, loss_worst, moved = compare(work, tie)
        ok = ok and worst <= TOLERANCE and loss_worst <= TOLERANCE and moved > 100 * TOLERANCE
    print("ok" if ok else f"FAILED: tolerance {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
