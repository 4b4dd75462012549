#!/usr/bin/env bash
# Installs what kx needs on Debian 12 (as root), then configures and builds it. Safe to run again:
# installed packages and an existing build are reused.
#
#   setup.sh [build_dir [cmake args...]]         everything: tests, benches, samples, every engine
#   setup.sh --main [build_dir [cmake args...]]  only what the main job needs: libkx (and the CUDA
#                                                module where the toolkit is) and the C sample
set -euo pipefail
cd "$(dirname "$0")/.."

main_only=0
if [[ ${1:-} == --main ]]; then
  main_only=1
  shift
fi

# The main job: a compiler, CMake, zlib, OpenBLAS and the Fashion-MNIST files.
main_packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libopenblas-dev dataset-fashion-mnist)

packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libgtest-dev libopenblas-dev dataset-fashion-mnist
  python3-numpy clang libclang-rt-14-dev libomp-14-dev rpm golang-go cargo abigail-tools
  libgloo-dev openmpi-bin libopenmpi-dev
  protobuf-compiler python3-protobuf python3-onnx python3-opencv python3-venv python3-pip python3-setuptools)
# The aarch64 cross build and its tests under emulation (scripts/run_aarch64_tests.sh): the cross
# compiler, qemu-user, and the target's zlib and GoogleTest as Debian arm64 (multiarch) packages.
packages+=(g++-aarch64-linux-gnu qemu-user-static zlib1g-dev:arm64 libgtest-dev:arm64)
# The image decoders of kx_dataset_from_image_directory.
packages+=(libjpeg62-turbo-dev libpng-dev)
# Keras's .h5 and .keras files (issue 32): libkx opens libhdf5 at run time (no headers needed), the
# tests need the library; h5dump (hdf5-tools) shows what a file holds.
packages+=(libhdf5-103-1 hdf5-tools)
if ((main_only)); then
  packages=("${main_packages[@]}")
else
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

build_dir=${1:-build}
shift || true
if ((main_only)); then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKX_BUILD_TESTS=OFF -DKX_BUILD_BENCH=OFF "$@"
  cmake --build "$build_dir" --target fashion_mnist_c
  # The CUDA module is loaded at run time, so no target depends on it: built where the toolkit is.
  if ninja -C "$build_dir" -t targets all 2>/dev/null | grep -q '^kx_cuda:'; then
    cmake --build "$build_dir" --target kx_cuda
  fi
else
  # The options explicitly: a main-job configure of the same directory may have turned them off.
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKX_BUILD_TESTS=ON -DKX_BUILD_BENCH=ON "$@"
  cmake --build "$build_dir"
fi
