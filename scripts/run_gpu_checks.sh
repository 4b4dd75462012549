#!/usr/bin/env bash
# Everything a short GPU loan is for, in one call: build with the CUDA module, every CUDA test (the
# CUDA suite, then its training tests again with streamed data, then the GPU cases of the other
# suites), the GPU benchmarks, their PyTorch peers (bench/torch_gpu.py, with the python3 that holds
# PyTorch) and the mirrored overhead. The whole run keeps to a time budget (KX_GPU_BUDGET_S, default 500 s: under the device
# tool's 10 minutes per command, with room for its transfers); each step gets what is left, up to its
# own cap, and a step the budget no longer covers is reported as skipped. One report, $OUT/gpu_report.txt
# (OUT defaults to build-gpu/out), holds every step's status, time and output; the exit status is 0
# only when every step that ran passed.
#
# The device has no network and no apt. Run `scripts/run_gpu_checks.sh --stage` here first: it copies
# Fashion-MNIST into data/fashion-mnist and GoogleTest's source and zlib into .gpu-deps/ (both
# git-ignored; carry them: carry ["data", ".gpu-deps"]), which the run uses where the device lacks them.
# cuDNN and NCCL come from /usr/local/cuda or, failing that, from PyTorch's nvidia-* wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ "${1:-}" = "--stage" ]; then
  set -e
  mkdir -p data .gpu-deps/zlib/include .gpu-deps/zlib/lib
  if [ -d /usr/share/datasets/fashion-mnist ] && [ ! -e data/fashion-mnist ]; then
    cp -r /usr/share/datasets/fashion-mnist data/fashion-mnist
  fi
  [ -d /usr/src/googletest ] && rm -rf .gpu-deps/googletest && cp -r /usr/src/googletest .gpu-deps/googletest
  cp /usr/include/zlib.h /usr/include/zconf.h .gpu-deps/zlib/include/ 2>/dev/null || true
  cp /usr/lib/x86_64-linux-gnu/libz.a .gpu-deps/zlib/lib/ 2>/dev/null || true
  du -sh data/fashion-mnist .gpu-deps 2>/dev/null
  exit 0
fi

out=${OUT:-build-gpu/out}
mkdir -p "$out"
report="$out/gpu_report.txt"
budget=${KX_GPU_BUDGET_S:-500}
start=$SECONDS
failed=0
: > "$report"

say() { printf '%s\n' "$*" | tee -a "$report"; }
left() { echo $((budget - (SECONDS - start))); }

# step NAME CAP_S COMMAND...: runs COMMAND under min(CAP_S, what is left of the budget), its output
# into the report; a step with under 10 s left is skipped.
step() {
  local name=$1 cap=$2
  shift 2
  local limit
  limit=$(left)
  [ "$limit" -gt "$cap" ] && limit=$cap
  if [ "$limit" -lt 10 ]; then
    say "== $name: SKIPPED (time budget of ${budget} s spent)"
    failed=1
    return 1
  fi
  local log
  log=$(mktemp)
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  local status="ok"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status="TIMED OUT after ${limit} s"
  elif [ $rc -ne 0 ]; then
    status="FAILED (exit $rc)"
  fi
  say "== $name: $status, $((SECONDS - t0)) s"
  cat "$log" >> "$report"
  rm -f "$log"
  say ""
  [ "$status" = "ok" ] || failed=1
  [ "$status" = "ok" ]
}

say "kx GPU checks, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git describe --always --dirty 2>/dev/null || echo unknown)"
say "budget ${budget} s; report $report"

# Preflight: what the run needs, each missing piece named.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -eq 0 ]; then
  say "FAILED: no NVIDIA GPU here (nvidia-smi -L lists none): run this on the device machine"
  exit 2
fi
nvidia-smi -L | tee -a "$report"
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
missing=""
[ -x "$nvcc" ] || command -v nvcc > /dev/null || missing+=" nvcc"
command -v cmake > /dev/null || missing+=" cmake"
command -v ninja > /dev/null || missing+=" ninja"
command -v c++ > /dev/null || missing+=" c++"
if [ -n "$missing" ]; then
  say "FAILED: missing on this machine:$missing"
  exit 2
fi
has_header() { printf '#include <%s>\n' "$1" | c++ -E -x c++ - "${@:2}" > /dev/null 2>&1; }

cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DKX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
            -DKX_BUILD_SAMPLES=OFF)
prefixes=""
if ! has_header zlib.h; then
  if [ -f .gpu-deps/zlib/include/zlib.h ]; then
    cmake_args+=(-DZLIB_ROOT="$root/.gpu-deps/zlib")
  else
    say "FAILED: no zlib.h here and none staged (scripts/run_gpu_checks.sh --stage, carry .gpu-deps)"
    exit 2
  fi
fi
if ! has_header gtest/gtest.h; then
  if [ -d .gpu-deps/googletest ]; then
    step "GoogleTest from the staged source" 120 bash -c "cmake -S .gpu-deps/googletest -B /tmp/kx-gtest-build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/tmp/kx-gtest && cmake --build /tmp/kx-gtest-build \
      -j $(nproc) && cmake --install /tmp/kx-gtest-build" || exit 1
    prefixes="/tmp/kx-gtest"
  else
    say "FAILED: no GoogleTest here and none staged (scripts/run_gpu_checks.sh --stage, carry .gpu-deps)"
    exit 2
  fi
fi
[ -n "$prefixes" ] && cmake_args+=(-DCMAKE_PREFIX_PATH="$prefixes")
# cuDNN and NCCL: their headers for the build, their libraries for the module's dlopen.
for lib in cudnn nccl; do
  [ -f "/usr/local/cuda/include/$lib.h" ] && continue
  dir=$(python3 -c "import nvidia.$lib, os; print(os.path.dirname(nvidia.$lib.__file__))" 2>/dev/null \
        || python3 -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], '$lib'))" 2>/dev/null)
  if [ -n "$dir" ] && [ -f "$dir/include/$lib.h" ]; then
    upper=$(echo "$lib" | tr a-z A-Z)
    cmake_args+=(-DKX_"$upper"_INCLUDE_DIR="$dir/include")
    export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "$lib from $dir"
  else
    say "warning: no $lib.h found: the module is built without $lib"
  fi
done
export KX_FASHION_MNIST_DIR=${KX_FASHION_MNIST_DIR:-$root/data/fashion-mnist}
[ -f "$KX_FASHION_MNIST_DIR/train-images-idx3-ubyte.gz" ] ||
  say "warning: no Fashion-MNIST in $KX_FASHION_MNIST_DIR: its tests skip and bench_mirrored fails (stage it)"
say ""

jobs=$(nproc)
# The CUDA module, its tests and the benches first; the other suites' GPU cases build in the
# background while the CUDA tests run (they use the GPU, the build the cores).
step "configure" 60 cmake -S . -B build-gpu "${cmake_args[@]}" || exit 1
step "build (module, CUDA tests, benches)" 240 \
  cmake --build build-gpu -j "$jobs" --target kx_cuda kx_cuda_tests bench_gpu bench_mirrored || exit 1
more_targets=(kx_unit_tests)
ninja -C build-gpu -t targets all 2>/dev/null | grep -q '^kx_multi_worker_tests:' &&
  more_targets+=(kx_multi_worker_tests kx_multi_worker_stepwise)
background_log=$(mktemp)
nice -n 10 ninja -C build-gpu -j "$jobs" "${more_targets[@]}" > "$background_log" 2>&1 &
background=$!

# kx_cuda_tests: CudaModule, CudaKernels, CudaTraining and Cuda/BackendOps (the op table).
step "CUDA tests" 170 ctest --test-dir build-gpu -j 2 -R '^Cuda(Module|Kernels|Training|/)' --timeout 240 \
  --output-on-failure
step "CUDA training tests, data streamed" 60 env KX_DATA_STREAMING=always \
  ctest --test-dir build-gpu -R '^CudaTraining' --timeout 120 --output-on-failure

# Out-of-bounds and uninitialised device memory, under NVIDIA's memory checker (where the image has it):
# the kernel tests, whose sizes keep it short.
sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ -x "$sanitizer" ]; then
  step "CUDA kernel tests under compute-sanitizer memcheck" 60 env KX_CUDA_MODULE="$root/build-gpu/libkx_cuda.so" \
    "$sanitizer" --tool memcheck --error-exitcode 1 ./build-gpu/tests/kx_cuda_tests --gtest_filter='CudaKernels.*' \
    --gtest_brief=1
fi

wait_limit=$(left)
[ "$wait_limit" -gt 120 ] && wait_limit=120
step "build (the other suites)" "$wait_limit" bash -c "while kill -0 $background 2>/dev/null; do sleep 1; done; \
  tail -3 '$background_log'; ! grep -q '^FAILED: ' '$background_log'"
kill "$background" 2>/dev/null  # ninja stops its compilers: nothing builds beside the benches
wait "$background" 2>/dev/null
rm -f "$background_log"
# The GPU cases of the CPU suites: logical replicas on one GPU, NCCL between GPUs and between worker
# processes (skipped, saying so, without two GPUs or the multi-worker module).
step "other suites' GPU tests" 90 ctest --test-dir build-gpu -R 'Gpu' -E '^Cuda' --timeout 90 --output-on-failure

steps=${BENCH_STEPS:-200}
step "bench_gpu" 120 ./build-gpu/bench/bench_gpu --steps "$steps" --no-peers
step "PyTorch peers (bench/torch_gpu.py)" 120 python3 bench/torch_gpu.py --steps "$steps" \
  --cases mlp:32,mlp:256,mlp:2048,wide:8192,cnn:64,resnet50:64,mobilenetv2:64
step "bench_gpu mlp, steps kernel by kernel" 40 env KX_STEP_GRAPHS=0 ./build-gpu/bench/bench_gpu --cases mlp \
  --steps "$steps" --no-peers
step "bench_mirrored cuda:0,cuda:0" 60 ./build-gpu/bench/bench_mirrored --data "$KX_FASHION_MNIST_DIR" \
  --devices cuda:0,cuda:0 --steps "$steps"
if [ "$gpus" -ge 2 ]; then
  step "bench_mirrored cuda:0,cuda:1 (NCCL)" 60 ./build-gpu/bench/bench_mirrored --data "$KX_FASHION_MNIST_DIR" \
    --devices cuda:0,cuda:1 --steps "$steps"
fi

say "== done in $((SECONDS - start)) s of ${budget}: $([ $failed -eq 0 ] && echo 'every step passed' || echo 'SOME STEPS FAILED')"
exit $failed
