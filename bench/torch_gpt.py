#!/usr/bin/python3
"""The PyTorch reference of popkit's GPT: the model, popkit's checkpoint names, a timing mode.

The architecture is GPT-2's (and nanoGPT's), float32: token embedding wte [V, C] plus
learned position embedding wpe [P, C] (P >= T), dropout; N pre-LN decoder blocks
    x = x + dropout(c_proj(attention(c_attn(ln_1(x)))))
    x = x + dropout(c_proj(gelu_tanh(c_fc(ln_2(x)))))
with causal multi-head self-attention (fused qkv projection c_attn [C -> 3C] whose
output columns are q | k | v, head h taking columns h HS .. h HS + HS - 1 of each,
softmax(q k^T / sqrt(HS)), dropout on the probabilities), an MLP of hidden width 4C
by default; a final layer norm ln_f; a head without bias, tied to wte by default (one
tensor, gradients of both uses summed). Loss: cross-entropy of the next token, the mean
over all B T positions. Shape letters: B batch, T sequence, C channels, NH heads,
HS = C / NH, V vocabulary, P positions.

Checkpoint names (proposed for popkit's safetensors): Hugging Face GPT-2's, less the
"transformer." prefix and with h<i> for h.<i> (a popkit layer name is one word). Every
variable has its full shape, row-major, float32. A linear's weight is [in, out] (popkit
computes x W, as Hugging Face's Conv1D does), so these tensors load into Hugging Face's
GPT2LMHeadModel unchanged; torch.nn.Linear holds the transpose.
    wte.weight                  [V, C]      (also the head's weight when tied)
    wpe.weight                  [P, C]
    h<i>.ln_1.weight, .bias     [C]         (layer norm scale and shift)
    h<i>.attn.c_attn.weight     [C, 3C]     h<i>.attn.c_attn.bias  [3C]
    h<i>.attn.c_proj.weight     [C, C]      h<i>.attn.c_proj.bias  [C]
    h<i>.ln_2.weight, .bias     [C]
    h<i>.mlp.c_fc.weight        [C, H]      h<i>.mlp.c_fc.bias     [H]   (H = 4C)
    h<i>.mlp.c_proj.weight      [H, C]      h<i>.mlp.c_proj.bias   [C]
    ln_f.weight, .bias          [C]
    lm_head.weight              [C, V]      (only when not tied)
A layer norm's ".scale" and ".shift" are read as ".weight" and ".bias", in case popkit's
layer_norm kind names them so.

Timing mode (the default when run): tokens/s of training steps (forward, backward,
Adam) on random bytes, one optimizer step per micro-batch, at PyTorch's best setting
on a small machine (see bench/torch_reference.py: OPENBLAS_NUM_THREADS=1,
OMP_WAIT_POLICY=passive, torch.set_num_threads(cores)). Prints one JSON object with
the median tokens/s of the repeats after warm-up, with min and max. Needs Debian's
python3-torch: run it with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


@dataclass
class GptConfig:
    vocab: int = 256        # V: byte-level text
    positions: int = 128    # P >= T
    channels: int = 128     # C
    heads: int = 4          # NH, dividing C
    blocks: int = 2
    hidden: int = 0         # the MLP's width; 0: 4 C
    embd_dropout: float = 0.0
    attn_dropout: float = 0.0
    resid_dropout: float = 0.0
    eps: float = 1e-5       # the layer norms'
    tied: bool = True

    def mlp_width(self):
        return self.hidden or 4 * self.channels


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.channels % cfg.heads == 0, "heads must divide channels"
        self.heads = cfg.heads
        self.c_attn = nn.Linear(cfg.channels, 3 * cfg.channels)
        self.c_proj = nn.Linear(cfg.channels, cfg.channels)
        self.attn_dropout = nn.Dropout(cfg.attn_dropout)
        self.resid_dropout = nn.Dropout(cfg.resid_dropout)
        mask = torch.tril(torch.ones(cfg.positions, cfg.positions, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.positions, cfg.positions), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, hs).transpose(1, 2)  # [B, NH, T, HS]
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.channels, cfg.mlp_width())
        self.c_proj = nn.Linear(cfg.mlp_width(), cfg.channels)
        self.dropout = nn.Dropout(cfg.resid_dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.channels, eps=cfg.eps)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.channels, eps=cfg.eps)
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.channels)
        self.wpe = nn.Embedding(cfg.positions, cfg.channels)
        self.drop = nn.Dropout(cfg.embd_dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.blocks))
        self.ln_f = nn.LayerNorm(cfg.channels, eps=cfg.eps)
        self.lm_head = nn.Linear(cfg.channels, cfg.vocab, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, tokens, targets=None):
        """Logits [B, T, V] of tokens [B, T] (int64); with targets, also the mean loss."""
        T = tokens.shape[1]
        assert T <= self.cfg.positions, f"sequence {T} > positions {self.cfg.positions}"
        x = self.drop(self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def init_gpt2(model, std=0.02, seed=None):
    """GPT-2's initialisation as popkit's model.init gives it: every linear weight and
    both embeddings normal(0, std), biases 0, layer norms scale 1 and shift 0 (no
    1/sqrt(2 N) scaling of the residual projections)."""
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0.0, std)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.LayerNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()


def _targets(model):
    """popkit name -> (parameter, True when popkit holds its transpose)."""
    out = {"wte.weight": (model.wte.weight, False), "wpe.weight": (model.wpe.weight, False),
           "ln_f.weight": (model.ln_f.weight, False), "ln_f.bias": (model.ln_f.bias, False)}
    for i, b in enumerate(model.h):
        linears = {"attn.c_attn": b.attn.c_attn, "attn.c_proj": b.attn.c_proj,
                   "mlp.c_fc": b.mlp.c_fc, "mlp.c_proj": b.mlp.c_proj}
        for name, lin in linears.items():
            out[f"h{i}.{name}.weight"] = (lin.weight, True)
            out[f"h{i}.{name}.bias"] = (lin.bias, False)
        for name, ln in (("ln_1", b.ln_1), ("ln_2", b.ln_2)):
            out[f"h{i}.{name}.weight"] = (ln.weight, False)
            out[f"h{i}.{name}.bias"] = (ln.bias, False)
    if not model.cfg.tied:
        out["lm_head.weight"] = (model.lm_head.weight, True)
    return out


def _canonical(name):
    for popkit_suffix, torch_suffix in ((".scale", ".weight"), (".shift", ".bias")):
        if name.endswith(popkit_suffix):
            return name[: -len(popkit_suffix)] + torch_suffix
    return name


def load_popkit(model, arrays):
    """Sets every parameter from a dict of numpy arrays named and laid out as popkit's
    checkpoint (see the module's docstring). Refuses a missing, unexpected or misshapen one."""
    targets = _targets(model)
    given = {_canonical(k): v for k, v in arrays.items()}
    missing = sorted(set(targets) - set(given))
    unexpected = sorted(set(given) - set(targets))
    if missing or unexpected:
        raise ValueError(f"checkpoint names: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        for name, (param, transposed) in targets.items():
            value = torch.from_numpy(given[name].astype("float32", copy=False))
            if transposed:
                value = value.t()
            if tuple(value.shape) != tuple(param.shape):
                shape = tuple(given[name].shape)
                raise ValueError(f"{name}: shape {shape}, the model's is {tuple(param.shape)}"
                                 + (" (transposed)" if transposed else ""))
            param.copy_(value)


def popkit_arrays(model):
    """The model's parameters as numpy arrays named and laid out as popkit's checkpoint."""
    return {name: (p.detach().t() if transposed else p.detach()).contiguous().numpy().copy()
            for name, (p, transposed) in _targets(model).items()}


def time_training(cfg, batch, seq, steps, repeats, warmup, seed):
    """Tokens/s of Adam training steps on random bytes: one rate per repeat."""
    torch.manual_seed(seed)
    model = Gpt(cfg)
    init_gpt2(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-5)
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, cfg.vocab, (8, batch, seq + 1), generator=g)
    cursor = [0]
    last_loss = [None]

    def step():
        window = data[cursor[0] % data.shape[0]]
        cursor[0] += 1
        opt.zero_grad(set_to_none=True)
        _, loss = model(window[:, :-1], window[:, 1:])
        loss.backward()
        opt.step()
        last_loss[0] = loss.detach()

    for _ in range(warmup):
        step()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        rates.append(batch * seq * steps / (time.perf_counter() - start))
    return rates, float(last_loss[0])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--steps", type=int, default=10, help="optimizer steps per timed repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: every core)")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    args.threads = args.threads or (os.cpu_count() or 1)
    torch.set_num_threads(args.threads)
    cfg = GptConfig(vocab=args.vocab, positions=args.seq, channels=args.channels,
                    heads=args.heads, blocks=args.blocks)
    rates, last_loss = time_training(cfg, args.batch, args.seq, args.steps, args.repeats,
                                     args.warmup, args.seed)
    params = sum(t.numel() for t in Gpt(cfg).parameters())
    print(json.dumps({
        "tool": "pytorch", "version": torch.__version__, "model": "gpt", "blocks": args.blocks,
        "channels": args.channels, "heads": args.heads, "seq": args.seq, "batch": args.batch,
        "vocab": args.vocab, "parameters": params, "threads": args.threads,
        "tokens_per_second": {"median": statistics.median(rates), "min": min(rates), "max": max(rates)},
        "repeats": len(rates), "steps_per_repeat": args.steps, "last_loss": last_loss,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
    }))


if __name__ == "__main__":
    sys.exit(main())
