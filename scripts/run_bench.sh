#!/usr/bin/env bash
# kx against what its users would pick instead, on this machine: TensorFlow 2.21 with Keras 3.15 (XLA on
# and off) and PyTorch 2.15 (eager and torch.compile) from the package index, in a pinned environment
# (scripts/python_venv.sh bench), same workloads, data, batch, optimiser and threads (2); speed, first
# step and peak memory per process. Then multi-worker against tf.distribute.MultiWorkerMirroredStrategy,
# and kx's own benches (GEMM kernels, mirrored replicas, workers, footprint).
#
#   run_bench.sh [--rounds N] [--workloads mlp:32,...] [--peers keras:xla,...]   (passed to compare.py)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
bash scripts/python_venv.sh bench build/bench-venv
cmake --build build --target bench_workload bench_gemm_roofline bench_mlp_cpu bench_cnn_cpu bench_mirrored > /dev/null
python3 bench/peers/compare.py --kx build/bench/bench_workload --python build/bench-venv/bin/python "$@"
# The ceiling: the CPU's FMA peak, and kx's and PyTorch's GEMMs at the workloads' shapes.
./build/bench/bench_gemm_roofline --threads 2 --python build/bench-venv/bin/python
# kx's GEMM kernels and mixed precision (the peers above already cover PyTorch).
./build/bench/bench_mlp_cpu --threads 2 --no-torch
./build/bench/bench_cnn_cpu --threads 2 --no-torch
# Mirrored overhead: 2 CPU replicas x 1 thread against 1 replica x 2 threads, global batch 256.
./build/bench/bench_mirrored --threads 2 --replicas 2 --batch 256
# Multi-worker (when the Gloo module was built): the engine's all-reduce bandwidth, 2 worker processes x 1
# thread against 1 process x 2 threads (TF_CONFIG and mpirun), and TensorFlow's MultiWorkerMirroredStrategy.
if [[ -f build/libkx_workers.so ]]; then
  ./build/bench/bench_allreduce
  ./build/bench/bench_multi_worker --steps 100
  build/bench-venv/bin/python bench/peers/tf_multi_worker.py --steps 100
  ./build/bench/bench_parameter_server --steps 1000
fi
# The edge footprint: library sizes, and the tiny MLP's first step and peak RSS with the CUDA module
# present and hidden.
bench/footprint.sh --build build
