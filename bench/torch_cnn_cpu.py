"""The PyTorch peer of bench_cnn_cpu: the Fashion-MNIST CNN (Conv 32 3x3 relu, MaxPool 2, Conv 64 3x3
relu, MaxPool 2, Flatten, Dropout 0.5, Dense 10; Adam 1e-3) on the CPU.

Prints "torch batch=B ms_per_step=X".
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch


def load(data_dir):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--autocast", choices=["bf16"], help="the forward pass under torch.autocast(\"cpu\", torch.bfloat16)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load(a.data)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    n = x.shape[0] // a.batch

    def step(i):
        j = (i % n) * a.batch
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = loss_fn(model(x[j:j + a.batch]), y[j:j + a.batch])
        loss.backward()
        opt.step()

    for i in range(20):
        step(i)
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(i)
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}", flush=True)
    print(f"torch batch={a.batch} ms_per_step={ms:.4f}", flush=True)


if __name__ == "__main__":
    main()
