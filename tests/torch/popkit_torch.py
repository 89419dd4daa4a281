"""PyTorch twins of popkit models, for tests that train both from one init and compare.

A model is built from popkit's own plan of the config (popplan plan --format json): its
layers in order, each with its kind, attributes and widths, so the twin is what popkit
runs, whatever the config spells. Parameters are named and laid out as popkit's
checkpoints (safetensors, float32, row-major): "<layer>.<parameter>", a linear weight
[in, out] (popkit computes x W; torch.nn.Linear holds the transpose). A new layer kind
adds an entry to KINDS: a function (layer) -> (module, {popkit name: (torch parameter,
transposed)}).

Needs /usr/bin/python3 with Debian's python3-torch and numpy; the safetensors module is
not needed (read_safetensors and write_safetensors parse the format with numpy).
"""
import json
import os
import struct
import subprocess

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- safetensors, float32 only -------------------------------------------------------


def read_safetensors(path):
    """{name: numpy float32 array} of a safetensors file (its metadata left out)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {t['dtype']}, not F32")
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype="<f4").reshape(t["shape"]).copy()
    return out


def write_safetensors(path, arrays):
    """Writes {name: array} as float32 tensors, in name order."""
    header, chunks, offset = {}, [], 0
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        chunks.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


# ---- the model -----------------------------------------------------------------------


def plan_of(config_path, popplan="popplan"):
    """popkit's training plan of the config, as JSON."""
    out = subprocess.run([popplan, "plan", config_path, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def _activation(name):
    return {"none": nn.Identity(), "relu": nn.ReLU(),
            "gelu": nn.GELU(approximate="tanh")}[name]  # popkit's GELU is the tanh form


def _linear(layer):
    fc = nn.Linear(layer["in_features"], layer["out_features"])
    module = nn.Sequential(fc, _activation(layer.get("activation", "none")))
    return module, {"weight": (fc.weight, True), "bias": (fc.bias, False)}


def _layer_norm(layer):
    ln = nn.LayerNorm(layer["in_features"], eps=layer["eps"])
    return ln, {"scale": (ln.weight, False), "shift": (ln.bias, False)}


KINDS = {"linear": _linear, "layer_norm": _layer_norm}


class Twin(nn.Module):
    """The layers of a popkit plan, in order, on flattened samples."""

    def __init__(self, plan):
        super().__init__()
        self.body = nn.ModuleList()
        self.params = {}  # popkit name -> (torch parameter, transposed)
        for layer in plan["layers"]:
            if layer["type"] not in KINDS:
                raise ValueError(f"layer {layer['name']}: no torch twin of kind {layer['type']}")
            module, params = KINDS[layer["type"]](layer)
            self.body.append(module)
            for suffix, p in params.items():
                self.params[f"{layer['name']}.{suffix}"] = p

    def forward(self, x):
        x = x.reshape(x.shape[0], -1)
        for m in self.body:
            x = m(x)
        return x

    def load(self, arrays):
        """Sets every parameter from popkit-named arrays."""
        with torch.no_grad():
            for name, (p, transposed) in self.params.items():
                value = torch.from_numpy(np.ascontiguousarray(arrays[name], dtype=np.float32))
                p.copy_(value.t() if transposed else value)

    def arrays(self):
        """The parameters, named and laid out as popkit's checkpoints."""
        return {name: (p.detach().t() if t else p.detach()).contiguous().numpy().copy()
                for name, (p, t) in self.params.items()}


# ---- data and training ---------------------------------------------------------------


def read_idx(path):
    """An IDX file (MNIST's format) of unsigned bytes as a numpy array."""
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def mnist_train(data_dir=None):
    """MNIST's training images and labels, where popkit reads them."""
    d = data_dir or os.environ.get("POPKIT_DATA_DIR") or os.path.expanduser("~/.cache/popkit/data")
    d = os.path.join(d, "mnist")
    return (read_idx(os.path.join(d, "train-images-idx3-ubyte")),
            read_idx(os.path.join(d, "train-labels-idx1-ubyte")))


def normalize(pixels, mean, std):
    """As popkit's host does, in float32: (p / 255 - mean) / std."""
    x = pixels.astype(np.float32) / np.float32(255.0)
    return (x - np.float32(mean)) / np.float32(std)


def adam_for(model, optimizer):
    """torch's Adam with the settings of popkit's adam optimizer section (as the plan
    writes it). popkit's update with bias correction is torch's; without weight decay."""
    if optimizer["type"] != "adam" or not optimizer["bias_correction"]:
        raise ValueError("the twin trains with adam and bias_correction only")
    if optimizer.get("weight_decay", 0.0) != 0.0:
        raise ValueError("the twin trains without weight decay")
    return torch.optim.Adam(model.parameters(), lr=optimizer["lr"],
                            betas=(optimizer["beta1"], optimizer["beta2"]), eps=optimizer["eps"])


def train(model, opt, images, labels, global_batch, steps):
    """`steps` optimizer steps over consecutive global batches in file order (popkit's
    data.shuffle: false), the loss the mean cross-entropy over each global batch."""
    for s in range(steps):
        begin = s * global_batch
        x = torch.from_numpy(images[begin:begin + global_batch])
        y = torch.from_numpy(labels[begin:begin + global_batch].astype(np.int64))
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


def largest_relative_difference(got, want):
    """Per parameter, max |got - want| over max |want|: the largest over all, and where."""
    worst, where = 0.0, None
    for name, w in want.items():
        scale = max(float(np.abs(w).max()), 1e-30)
        d = float(np.abs(got[name].astype(np.float64) - w).max()) / scale
        if d >= worst:
            worst, where = d, name
    return worst, where
