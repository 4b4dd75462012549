#!/usr/bin/env bash
# Installs what kx needs to build, test and run its samples on Debian 12 (as root), then configures and
# builds it in build/. Safe to run again: installed packages and an existing build are reused.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libgtest-dev libopenblas-dev dataset-fashion-mnist
  python3-numpy clang libclang-rt-14-dev libomp-14-dev rpm golang-go cargo abigail-tools
  libgloo-dev openmpi-bin libopenmpi-dev
  protobuf-compiler python3-protobuf python3-onnx python3-opencv python3-venv python3-pip python3-setuptools)
# The aarch64 cross build and its tests under emulation (scripts/run_aarch64_tests.sh): the cross
# compiler, qemu-user, and the target's zlib and GoogleTest as Debian arm64 (multiarch) packages.
packages+=(g++-aarch64-linux-gnu qemu-user-static zlib1g-dev:arm64 libgtest-dev:arm64)
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
# The image decoders of kx_dataset_from_image_directory.
packages+=(libjpeg62-turbo-dev libpng-dev)
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
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir"
