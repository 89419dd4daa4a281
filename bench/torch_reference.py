#!/usr/bin/python3
"""The PyTorch reference for popkit's throughput benchmarks.

The same model popkit trains: 784 -> 512 GELU(tanh) -> 512 GELU -> 512 GELU -> 10,
softmax cross-entropy, Adam (lr 1e-3, betas 0.9/0.999, eps 1e-5), float32, on the
real MNIST training set popkit reads (scripts/fetch_data.sh; normalised as popkit does,
mean 0.1307, std 0.3081), cycled in order, or with --data synthetic on prototypes plus
noise. Reports the last step's loss, so a benchmark can check the data did not collapse
to a zero loss (subnormal arithmetic). Modes:
  plain     one process, one optimizer step per global batch
  emulated  one process, replicas x accumulation micro-batches per step: forward and
            backward each micro-batch, gradients summed (loss scaled by 1/(R*A)), step
  ddp       `--replicas` processes with DistributedDataParallel over gloo on
            127.0.0.1, each accumulating `--accumulation` micro-batches per step
Prints one JSON object: samples/s as the median of the repeats after warm-up, with
min and max. Needs Debian's python3-torch, so run it with /usr/bin/python3.
"""
import argparse
import json
import os
import statistics
import sys
import time

# Debian's PyTorch runs its GEMMs in OpenBLAS, whose own threads fight torch's on a small
# machine; one OpenBLAS thread per torch thread is PyTorch's best setting here. torch's
# OpenMP threads spin at barriers by default (OMP_WAIT_POLICY=active): on a 2-core
# machine shared with anything else, a spinning thread holds the core its partner needs
# and throughput collapses (measured: 124 samples/s active vs 5,900 passive, plain
# batch 64, 2 threads, machine loaded). Passive waiting is PyTorch's best setting here.
# Both must be set before torch is imported; an explicit environment value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 512)
        self.fc4 = nn.Linear(512, 10)

    def forward(self, x):
        x = F.gelu(self.fc1(x), approximate="tanh")
        x = F.gelu(self.fc2(x), approximate="tanh")
        x = F.gelu(self.fc3(x), approximate="tanh")
        return self.fc4(x)


def read_idx(path):
    """An IDX file as a uint8 tensor of its shape (big-endian header, as popkit reads)."""
    with open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    data = torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8)
    return data.reshape(dims)


def mnist_data(data_dir):
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte")).reshape(-1, 784)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte")).long()
    return (images.float() / 255.0 - 0.1307) / 0.3081, labels


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.rand(10, 784, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = prototypes[labels] + 0.25 * torch.randn(n, 784, generator=g)
    return images, labels


def timed_steps(step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - start


def run(args, rank=0, world=1):
    torch.manual_seed(args.seed)
    model = Mlp()
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-5)
    mb = args.micro_batch
    if args.mode == "plain":
        per_step_batches = 1
        mb = args.micro_batch * args.replicas * args.accumulation
    elif args.mode == "emulated":
        per_step_batches = args.replicas * args.accumulation
    else:
        per_step_batches = args.accumulation
    if args.data == "mnist":
        images, labels = mnist_data(args.data_dir)
        # Each process its own slice of the set, as popkit's replicas read theirs.
        per_rank = images.shape[0] // world
        images = images[rank * per_rank:(rank + 1) * per_rank]
        labels = labels[rank * per_rank:(rank + 1) * per_rank]
    else:
        images, labels = make_data(mb * per_step_batches * 4, args.seed + rank)
    n_batches = images.shape[0] // mb
    cursor = [0]
    last_loss = [None]  # the last step's loss as a tensor: read after the timing, no sync inside

    def step():
        opt.zero_grad(set_to_none=True)
        total = None
        for k in range(per_step_batches):
            lo = (cursor[0] % n_batches) * mb
            cursor[0] += 1
            x, y = images[lo:lo + mb], labels[lo:lo + mb]
            ctx = model.no_sync() if world > 1 and k < per_step_batches - 1 else _Null()
            with ctx:
                loss = F.cross_entropy(model(x), y) / per_step_batches
                loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        opt.step()
        last_loss[0] = total

    global_batch = args.micro_batch * args.replicas * args.accumulation
    timed_steps(step, args.warmup)
    rates = []
    for _ in range(args.repeats):
        if world > 1:
            torch.distributed.barrier()
        seconds = timed_steps(step, args.steps)
        rates.append(global_batch * args.steps / seconds)
    return rates, float(last_loss[0])


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def ddp_worker(rank, args, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(args.threads)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=args.replicas)
    result = run(args, rank, args.replicas)
    if rank == 0:
        queue.put(result)
    torch.distributed.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["plain", "emulated", "ddp"], default="plain")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--accumulation", type=int, default=4)
    p.add_argument("--steps", type=int, default=50, help="optimizer steps per timed repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: cores / processes)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--data", choices=["mnist", "synthetic"], default="mnist")
    p.add_argument("--data-dir", default=os.path.join(
        os.environ.get("POPKIT_DATA_DIR") or os.path.expanduser("~/.cache/popkit/data"), "mnist"))
    args = p.parse_args()
    cores = os.cpu_count() or 1
    if args.threads <= 0:
        args.threads = max(1, cores // (args.replicas if args.mode == "ddp" else 1))
    if args.mode == "ddp":
        import torch.multiprocessing as mp
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.spawn(ddp_worker, args=(args, queue), nprocs=args.replicas, join=True)
        rates, last_loss = queue.get()
    else:
        torch.set_num_threads(args.threads)
        rates, last_loss = run(args)
    print(json.dumps({
        "tool": "pytorch", "version": torch.__version__, "mode": args.mode,
        "micro_batch": args.micro_batch, "replicas": args.replicas, "accumulation": args.accumulation,
        "global_batch": args.micro_batch * args.replicas * args.accumulation, "threads": args.threads,
        "samples_per_second": {"median": statistics.median(rates), "min": min(rates), "max": max(rates)},
        "repeats": len(rates), "steps_per_repeat": args.steps, "data": args.data,
        "last_loss": last_loss,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", ""),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
    }))


if __name__ == "__main__":
    sys.exit(main())
