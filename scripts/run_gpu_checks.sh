#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (no apt, no network): build with the CUDA module, run the CUDA
# tests and the GPU benchmark. Results go to $OUT (default build-gpu/out). Fashion-MNIST is read
# from KX_FASHION_MNIST_DIR (default: data/fashion-mnist, git-ignored, copied there beforehand).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-gpu/out}
mkdir -p "$out"
export KX_FASHION_MNIST_DIR=${KX_FASHION_MNIST_DIR:-$PWD/data/fashion-mnist}
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  > "$out/configure.txt" 2>&1 || { tail -30 "$out/configure.txt"; exit 1; }
cmake --build build-gpu -j "$(nproc)" > "$out/build.txt" 2>&1 || { grep -E "error" "$out/build.txt" | head -30; exit 1; }
ctest --test-dir build-gpu -R "Cuda|Mirrored" --output-on-failure > "$out/cuda_tests.txt" 2>&1
tail -25 "$out/cuda_tests.txt"
# NCCL across worker processes: one worker on cuda:0 with a communicator of 1 rank made as a job's
# is (two when the machine has two GPUs). Skips, saying so, without the multi-worker module (Gloo).
ctest --test-dir build-gpu -R "MultiWorkerStepwise.Gpu" -V > "$out/nccl_workers_test.txt" 2>&1
grep -E "NCCL vs|Skipped|SKIP|Passed|Failed" "$out/nccl_workers_test.txt" | tail -8
# The training tests again with every batch streamed through the page-locked rings.
KX_DATA_STREAMING=always ctest --test-dir build-gpu -R "CudaTraining" --output-on-failure \
  > "$out/cuda_tests_streamed.txt" 2>&1
tail -8 "$out/cuda_tests_streamed.txt"
timeout 500 ./build-gpu/bench/bench_gpu --steps "${BENCH_STEPS:-500}" > "$out/bench_gpu.txt" 2>&1
cat "$out/bench_gpu.txt"
# The MLP steps run kernel by kernel, for the gain of the recorded step.
KX_STEP_GRAPHS=0 timeout 200 ./build-gpu/bench/bench_gpu --cases mlp --steps "${BENCH_STEPS:-500}" \
  > "$out/bench_gpu_no_graphs.txt" 2>&1
cat "$out/bench_gpu_no_graphs.txt"
# Mirrored overhead on the GPU: two logical replicas of cuda:0 against one; NCCL across two GPUs
# when the machine has them.
timeout 300 ./build-gpu/bench/bench_mirrored --data "$KX_FASHION_MNIST_DIR" --devices cuda:0,cuda:0 --steps 500 \
  > "$out/bench_mirrored_gpu.txt" 2>&1
cat "$out/bench_mirrored_gpu.txt"
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  timeout 300 ./build-gpu/bench/bench_mirrored --data "$KX_FASHION_MNIST_DIR" --devices cuda:0,cuda:1 --steps 500 \
    > "$out/bench_mirrored_nccl.txt" 2>&1
  cat "$out/bench_mirrored_nccl.txt"
fi
