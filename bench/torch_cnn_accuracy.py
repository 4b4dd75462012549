"""The accuracy peer of samples/cpp/fashion_mnist_cnn: the same CNN and recipe in PyTorch (Conv 32 3x3
relu, MaxPool 2, Conv 64 3x3 relu, MaxPool 2, Flatten, Dropout 0.5, Dense 10; Adam 1e-3 eps 1e-7,
batch 64, 2 epochs, reshuffled each epoch), with Keras's initialisation (Glorot-uniform kernels, zero
biases) unless --torch-init. Prints the test accuracy for each seed.

    python3 bench/torch_cnn_accuracy.py [--data DIR] [--epochs 2] [--torch-init] SEED...
"""
import argparse
import gzip
import os

import numpy as np
import torch


def load(data_dir, images, labels):
    with gzip.open(os.path.join(data_dir, images)) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    with gzip.open(os.path.join(data_dir, labels)) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--torch-init", action="store_true")
    p.add_argument("seeds", type=int, nargs="+")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load(a.data, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
    xt, yt = load(a.data, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    nn = torch.nn
    for seed in a.seeds:
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, 10))
        if not a.torch_init:
            for m in model:
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.zeros_(m.bias)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(a.epochs):
            model.train()
            order = torch.randperm(x.shape[0])
            for i in range(0, x.shape[0], 64):
                idx = order[i:i + 64]
                opt.zero_grad(set_to_none=True)
                loss_fn(model(x[idx]), y[idx]).backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(xt).argmax(1) == yt).float().mean().item()
        print(f"torch {torch.__version__} seed={seed} epochs={a.epochs} test_accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
