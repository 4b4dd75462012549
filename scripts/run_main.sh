#!/usr/bin/env bash
# The main job: set up, build, and train the Fashion-MNIST sample (MLP 784-256-256-10, Adam, 2 epochs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
./build/samples/fashion_mnist_c /usr/share/datasets/fashion-mnist 2
