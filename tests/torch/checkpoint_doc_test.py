"""docs/checkpoints.md is true of the checkpoints poprun writes: a small GPT, its head
tied and untied, trained a few steps by poprun from popkit_torch.gpt_init's init (whose
spread logits make greedy text vary from byte to byte), whose checkpoint holds exactly the
tensors the page's GPT table names, with the shapes it gives; and the page's PyTorch
script (its one ```python block), run on that checkpoint, scores the validation split
as `poprun eval` does (to 1e-4 relative) and continues a prompt greedily to the same
bytes as `poprun generate --temperature 0`.

Run by ctest (torch.checkpoint_doc) with poprun on PATH and the fortunes text where
scripts/fetch_data.sh puts it.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import popkit_torch as pt  # noqa: E402

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                    "checkpoints.md")
STEPS = 3
TOLERANCE = 1e-4
PROMPT, TOKENS = "The ", 40
V, P, C, F, T = 256, 40, 48, 136, 32

CONFIG = f"""\
version: 1
name: checkpoint-doc
model:
  layers:
    - {{name: emb, type: embedding, vocabulary: {V}, positions: {P}, width: {C}}}
    - {{name: block0, type: decoder_block, heads: 3, hidden: {F}}}
    - {{name: block1, type: decoder_block, heads: 3, hidden: {F}}}
    - {{name: final_ln, type: layer_norm}}
    - {{name: lm, type: lm_head, vocabulary: {V}TIE}}
execution: {{mode: standard}}
training:
  micro_batch_size: 8
  optimizer: {{type: adam, lr: 1.0e-4}}
data: {{dataset: text, path: text/fortunes.txt, sequence_length: {T}}}
"""
NAMES = {"E": ["emb"], "B": ["block0", "block1"], "L": ["final_ln"], "H": ["lm"]}
ROW = re.compile(r"^\| `([EBLH])\.([^`]+)` \| \[([^\]]*)\] \|")


def page():
    with open(PAGE) as f:
        return f.read()


def documented_tensors(text, tied):
    """{name: shape} of the page's GPT table for this test's config."""
    sizes = {"V": V, "P": P, "C": C, "F": F}
    out = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if not m or (tied and m.group(1) == "H"):
            continue
        shape = []
        for dim in m.group(3).split(", "):
            n = 1
            for factor in dim.split():
                n *= sizes[factor] if factor in sizes else int(factor)
            shape.append(n)
        for layer in NAMES[m.group(1)]:
            out[f"{layer}.{m.group(2)}"] = shape
    return out


def checkpoint_tensors(path):
    """{name: shape} of a checkpoint's parameters (the optimizer's state left out)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items()
            if k != "__metadata__" and not k.endswith((".adam_m", ".adam_v"))}


def run(args):
    return subprocess.run(args, check=True, capture_output=True).stdout


def check(work, script, tied):
    """The failures for one config, as text (none: an empty list)."""
    pt.PopkitRun(work, CONFIG.replace("TIE", ", tied_to: emb" if tied else ""), STEPS,
                 pt.gpt_init)
    run_dir = os.path.join(work, "run")
    checkpoint = os.path.join(run_dir, f"checkpoint-step{STEPS}.safetensors")
    failures = []
    head = "tied" if tied else "untied"
    got, want = checkpoint_tensors(checkpoint), documented_tensors(page(), tied)
    if got != want:
        failures.append(f"{head}: the checkpoint holds {got}, the page says {want}")

    evaluation = json.loads(run(["poprun", "eval", run_dir, "--format", "json"]))
    generated = os.path.join(work, "generated.txt")
    run(["poprun", "generate", checkpoint, "--prompt", PROMPT, "--tokens", str(TOKENS),
         "--temperature", "0", "--quiet", "-o", generated])
    with open(generated, "rb") as f:
        popkit_text = f.read().decode(errors="backslashreplace")
    fortunes = os.path.join(pt.popkit_data_dir(), "text", "fortunes.txt")
    n_train = len(pt.text_training_split(fortunes))  # the validation split is the rest
    validation = os.path.join(work, "validation.txt")
    with open(fortunes, "rb") as f, open(validation, "wb") as out:
        out.write(f.read()[n_train:])

    # The script prints "loss X over N windows", then the text and a newline.
    first, text = run(["/usr/bin/python3", script, checkpoint, validation, PROMPT,
                       str(TOKENS)]).decode().split("\n", 1)
    loss, text = float(first.split()[1]), text[:-1]
    difference = abs(loss - evaluation["loss"]) / evaluation["loss"]
    print(f"{head} head: the page's script scores {loss:.6f}, poprun eval "
          f"{evaluation['loss']:.6f} ({difference:.2g} apart); greedy text "
          f"{'the same' if text == popkit_text else 'differs'}: {text!r}")
    if difference > TOLERANCE:
        failures.append(f"{head}: the script's loss {loss} is not poprun eval's "
                        f"{evaluation['loss']}")
    if text != popkit_text:
        failures.append(f"{head}: the script continues {text!r}, poprun generate "
                        f"{popkit_text!r}")
    return failures


def main():
    blocks = re.findall(r"^```python\n(.*?)^```$", page(), flags=re.S | re.M)
    if len(blocks) != 1:
        print(f"FAILED: {PAGE} has {len(blocks)} python blocks, not 1")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "gpt_from_popkit.py")
        with open(script, "w") as f:
            f.write(blocks[0])
        for tied in (True, False):
            folder = os.path.join(work, "tied" if tied else "untied")
            os.mkdir(folder)
            failures += check(folder, script, tied)
    for failure in failures:
        print("FAILED:", failure)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
