"""PyTorch twins of popkit models, for tests that train both from one init and compare.

A model is built from popkit's own plan of the config (popplan plan --format json): its
layers in order, each with its kind, attributes and widths, so the twin is what popkit
runs, whatever the config spells. Parameters are named and laid out as popkit's
checkpoints (safetensors, float32, row-major; docs/checkpoints.md): "<layer>.<parameter>",
a linear weight [in, out] (popkit computes x W; torch.nn.Linear holds the transpose). A
new layer kind adds an entry to KINDS: a function (layer, params) -> (module, {popkit
name: (torch parameter, transposed)}), where params holds the earlier layers' parameters
by popkit name (a tied lm_head takes its embedding's token table from there, and names
no parameter of its own: the checkpoint stores it once).

A language model (its first layer an embedding) takes token ids [B, T] and gives logits
[B, T, V]; the loss is the mean cross-entropy over every position, as popkit's
softmax_cross_entropy over B T rows.

Needs /usr/bin/python3 with Debian's python3-torch and numpy; the safetensors module is
not needed (read_safetensors and write_safetensors parse the format with numpy).
"""
import json
import math
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


# popkit's GELU is the tanh form (engine/tensor/layers.h); GELU_FORM lets a test build a
# deliberately wrong twin to see that it fails.
GELU_FORM = "tanh"


def _activation(name):
    return {"none": nn.Identity(), "relu": nn.ReLU(),
            "gelu": nn.GELU(approximate=GELU_FORM)}[name]


def _linear(layer, params):
    fc = nn.Linear(layer["in_features"], layer["out_features"])
    module = nn.Sequential(fc, _activation(layer.get("activation", "none")))
    return module, {"weight": (fc.weight, True), "bias": (fc.bias, False)}


def _width(layer):
    """Features a position: a sequence model's layers see [B, T, C]."""
    return layer["in_features"] // layer.get("sequence", 1)


def _layer_norm(layer, params):
    ln = nn.LayerNorm(_width(layer), eps=layer["eps"])
    return ln, {"scale": (ln.weight, False), "shift": (ln.bias, False)}


class Embedding(nn.Module):
    """out[b, t] = wte[token[b, t]] + wpe[t]: wte [V, C], wpe [positions, C]."""

    def __init__(self, vocabulary, positions, width):
        super().__init__()
        self.wte = nn.Embedding(vocabulary, width)
        self.wpe = nn.Embedding(positions, width)

    def forward(self, tokens):
        return self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))


def _embedding(layer, params):
    e = Embedding(layer["vocabulary"], layer["positions"], layer["width"])
    return e, {"wte": (e.wte.weight, False), "wpe": (e.wpe.weight, False)}


class DecoderBlock(nn.Module):
    """GPT-2's pre-LN block as engine/decoder_block.h runs it:
    a = ln1(x); q, k, v = a Wqkv + b (head h's columns h HS .. of each);
    o = softmax(q k^T / sqrt(HS), causal) v; h = x + drop(o Wproj + b);
    y = h + drop(gelu(ln2(h) Wfc + b) Wfc2 + b); the probabilities dropped too."""

    def __init__(self, width, heads, hidden, eps, attention_dropout, residual_dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width, eps=eps)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width, eps=eps)
        self.fc = nn.Linear(width, hidden)
        self.gelu = _activation("gelu")
        self.fc2 = nn.Linear(hidden, width)
        self.drop_attention = nn.Dropout(attention_dropout)
        self.drop_residual = nn.Dropout(residual_dropout)

    def attention(self, a):
        B, T, C = a.shape
        HS = C // self.heads
        q, k, v = (t.reshape(B, T, self.heads, HS).transpose(1, 2)
                   for t in self.qkv(a).split(C, dim=2))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        p = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return (self.drop_attention(p) @ v).transpose(1, 2).reshape(B, T, C)

    def forward(self, x):
        h = x + self.drop_residual(self.proj(self.attention(self.ln1(x))))
        return h + self.drop_residual(self.fc2(self.gelu(self.fc(self.ln2(h)))))


def _decoder_block(layer, params):
    b = DecoderBlock(_width(layer), layer["heads"], layer["hidden"], layer["eps"],
                     layer["attention_dropout"], layer["residual_dropout"])
    names = {"ln1.scale": (b.ln1.weight, False), "ln1.shift": (b.ln1.bias, False),
             "ln2.scale": (b.ln2.weight, False), "ln2.shift": (b.ln2.bias, False)}
    for popkit, fc in (("attn.qkv", b.qkv), ("attn.proj", b.proj), ("mlp.fc", b.fc),
                       ("mlp.proj", b.fc2)):
        names[popkit + ".weight"] = (fc.weight, True)
        names[popkit + ".bias"] = (fc.bias, False)
    return b, names


class LmHead(nn.Module):
    """logits[b, t] = x[b, t] W^T, W [V, C] laid out as the token table."""

    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return F.linear(x, self.weight)


def _lm_head(layer, params):
    if layer.get("tied_to"):  # the embedding's wte itself: one parameter, gradients summed
        return LmHead(params[layer["tied_to"] + ".wte"][0]), {}
    head = LmHead(nn.Parameter(torch.empty(layer["vocabulary"], _width(layer))))
    return head, {"weight": (head.weight, False)}


KINDS = {"linear": _linear, "layer_norm": _layer_norm, "embedding": _embedding,
         "decoder_block": _decoder_block, "lm_head": _lm_head}


class Twin(nn.Module):
    """The layers of a popkit plan, in order: on flattened samples, or on token ids [B, T]
    for a language model."""

    def __init__(self, plan):
        super().__init__()
        self.body = nn.ModuleList()
        self.params = {}  # popkit name -> (torch parameter, transposed)
        self.tokens = plan["layers"][0]["type"] == "embedding"
        for layer in plan["layers"]:
            if layer["type"] not in KINDS:
                raise ValueError(f"layer {layer['name']}: no torch twin of kind {layer['type']}")
            module, params = KINDS[layer["type"]](layer, self.params)
            self.body.append(module)
            for suffix, p in params.items():
                self.params[f"{layer['name']}.{suffix}"] = p

    def forward(self, x):
        if not self.tokens:
            x = x.reshape(x.shape[0], -1)
        for m in self.body:
            x = m(x)
        return x

    def loss(self, x, y):
        """The mean cross-entropy over samples, or over every position of a sequence."""
        logits = self(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

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


def gpt_init(twin, seed=11):
    """An init of a GPT twin's parameters, popkit-named, that makes every part show:
    linear weights normal with std 1 / sqrt(fan-in) (the MLP's pre-activations of order 1,
    so the GELU's form matters), biases, the tables and the layer norms' shift
    normal(0.1), their scale 1 + normal(0.1)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, value in twin.arrays().items():
        if name.endswith(".scale"):
            out[name] = 1.0 + 0.1 * rng.standard_normal(value.shape)
        elif name.endswith((".shift", ".bias", ".wte", ".wpe")):
            out[name] = 0.1 * rng.standard_normal(value.shape)
        else:  # a linear's [in, out] or the head's [V, C]
            fan_in = value.shape[1] if name.endswith("head.weight") else value.shape[0]
            out[name] = rng.standard_normal(value.shape) / np.sqrt(fan_in)
    return {k: v.astype(np.float32) for k, v in out.items()}


class PopkitRun:
    """poprun's training of a config from an init this side writes: the plan, the twin
    (loaded with the init), the init, and after `steps` steps popkit's parameters (its
    checkpoint, less the optimizer state) and losses (its run file's)."""

    def __init__(self, work, config_text, steps, initial_arrays):
        config = os.path.join(work, "config.yaml")
        with open(config, "w") as f:
            f.write(config_text)
        self.plan = plan_of(config)
        self.twin = Twin(self.plan)
        self.init = initial_arrays(self.twin)
        init_path = os.path.join(work, "init.safetensors")
        write_safetensors(init_path, self.init)
        run_dir = os.path.join(work, "run")
        subprocess.run(["poprun", "train", config, "--steps", str(steps), "--init-from",
                        init_path, "--run-dir", run_dir, "--quiet"], check=True)
        checkpoint = read_safetensors(os.path.join(run_dir, f"checkpoint-step{steps}.safetensors"))
        self.params = {k: v for k, v in checkpoint.items()
                       if not k.endswith((".adam_m", ".adam_v"))}
        with open(os.path.join(run_dir, "run.json")) as f:
            self.losses = json.load(f)["loss"]
        self.twin.load(self.init)


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
    d = os.path.join(data_dir or popkit_data_dir(), "mnist")
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


def train(model, opt, inputs, targets, global_batch, steps):
    """`steps` optimizer steps over consecutive global batches of the inputs (popkit's
    data.shuffle: false), the loss the mean cross-entropy over each global batch (over
    every position for a language model). The losses, step by step."""
    losses = []
    for s in range(steps):
        begin = s * global_batch
        x = torch.from_numpy(inputs[begin:begin + global_batch])
        y = torch.from_numpy(targets[begin:begin + global_batch].astype(np.int64))
        opt.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# ---- text: engine/data/text_dataset.h's windows ------------------------------------------

_MASK = (1 << 64) - 1


def _splitmix64(state):
    """(next state, value): engine/tensor/random.h's splitmix64."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def _uniform_below(state, bound):
    limit = _MASK - (_MASK % bound)
    state, x = _splitmix64(state)
    while x >= limit:
        state, x = _splitmix64(state)
    return x % bound


def text_window_shift(n_bytes, seq_len, seed, epoch):
    """The epoch's shift of every training window (text_window_shift's draw)."""
    windows = (n_bytes - 1) // seq_len
    windows = windows - 1 if windows >= 2 else windows
    most = min(seq_len - 1, n_bytes - 1 - windows * seq_len)
    if most <= 0:
        return 0
    _, z = _splitmix64(seed ^ 0x7E475B1F0C3D92A5)
    state, _ = _splitmix64(z ^ epoch)
    return _uniform_below(state, most + 1)


def text_training_split(path, validation_fraction=0.1):
    """The training split of a text file: all but its last floor(n x fraction) bytes."""
    with open(path, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    return data[:len(data) - math.floor(len(data) * validation_fraction)]


def text_windows(split, seq_len, count, seed):
    """The first `count` windows of epoch 0 without shuffle: inputs bytes [s, s + T) and
    targets [s + 1, s + T + 1) at s = i T + the epoch's shift, each [count, T]."""
    shift = text_window_shift(len(split), seq_len, seed, 0)
    starts = np.arange(count) * seq_len + shift
    inputs = np.stack([split[s:s + seq_len] for s in starts]).astype(np.int64)
    targets = np.stack([split[s + 1:s + seq_len + 1] for s in starts]).astype(np.int64)
    return inputs, targets


def popkit_data_dir():
    """Where popkit reads its data (engine/data/dataset.cpp's data_dir)."""
    return os.environ.get("POPKIT_DATA_DIR") or os.path.expanduser("~/.cache/popkit/data")


def largest_relative_difference(got, want):
    """Per parameter, max |got - want| over max |want|: the largest over all, and where."""
    worst, where = 0.0, None
    for name, w in want.items():
        scale = max(float(np.abs(w).max()), 1e-30)
        d = float(np.abs(got[name].astype(np.float64) - w).max()) / scale
        if d >= worst:
            worst, where = d, name
    return worst, where
