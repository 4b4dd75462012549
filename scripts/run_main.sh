#!/usr/bin/env bash
# The main job: set up and build only what it needs (libkx, the C sample), and train the
# Fashion-MNIST sample (MLP 784-256-256-10, Adam, 2 epochs) on every GPU, else on two CPU
# replicas, with a checkpoint after each epoch in build/fashion-mnist-checkpoints. Each run starts fresh; run the sample itself again to see it resume.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main build
rm -rf build/fashion-mnist-checkpoints
./build/samples/fashion_mnist_c /usr/share/datasets/fashion-mnist 2 build/fashion-mnist-checkpoints
