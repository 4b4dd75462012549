#!/usr/bin/env bash
# CPU benchmark of kx against PyTorch (Debian's python3-torch) on this machine, 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed" ||
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-torch python3-numpy; }
./build/bench/bench_mlp_cpu --threads 2 "$@"
# Mirrored overhead: 2 CPU replicas x 1 thread against 1 replica x 2 threads, global batch 256.
./build/bench/bench_mirrored --threads 2 --replicas 2 --batch 256
# The Fashion-MNIST CNN at batch 64 against PyTorch.
./build/bench/bench_cnn_cpu --threads 2
# Multi-worker (when the Gloo module was built): the engine's all-reduce bandwidth, and 2 worker
# processes x 1 thread against 1 process x 2 threads.
if [[ -f build/libkx_workers.so ]]; then
  ./build/bench/bench_allreduce
  ./build/bench/bench_multi_worker --steps 100
  ./build/bench/bench_parameter_server --steps 1000
fi
# The edge footprint: library sizes, and the tiny MLP's first step and peak RSS with the CUDA module
# present and hidden.
bench/footprint.sh --build build
