"""The PyTorch peer of bench_mlp_cpu: the same MLP, optimiser and batch sizes on the CPU.

Prints one line per batch size: "torch batch=B ms_per_step=X".
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch


def load(data_dir):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def bench(x, y, batch, steps, autocast=False):
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = x.shape[0] // batch

    def step(i):
        j = (i % n) * batch
        xb, yb = x[j:j + batch], y[j:j + batch]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for i in range(50):
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    return (time.perf_counter() - t0) * 1e3 / steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batches", default="32,256", help="comma-separated batch sizes")
    p.add_argument("--autocast", choices=["bf16"], help="the forward pass under torch.autocast(\"cpu\", torch.bfloat16)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load(a.data)
    perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(1))
    x, y = x[perm].contiguous(), y[perm].contiguous()
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}", flush=True)
    for batch in (int(b) for b in a.batches.split(",")):
        print(f"torch batch={batch} ms_per_step={bench(x, y, batch, a.steps, a.autocast == 'bf16'):.4f}", flush=True)


if __name__ == "__main__":
    main()
