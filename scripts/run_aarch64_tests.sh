#!/usr/bin/env bash
# Cross-builds the CPU SDK and its tests for aarch64 (cmake/aarch64-linux-gnu.cmake, Debian's
# g++-aarch64-linux-gnu) and runs a part of the CPU test suite under qemu-user: the GEMM against float64
# (there the NEON kernel), the layers, losses and optimizers against their float64 references, and the C
# ABI. Built without OpenBLAS (the SDK's own GEMM, nothing from libgfortran), CUDA or the multi-worker
# module. Then the arm64 .deb packages from the same build (packaging/build_arm64_deb.sh). Packages to
# install first: scripts/setup.sh.
#
#   scripts/run_aarch64_tests.sh [BUILD_DIR] [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-aarch64}
shift || true

# Under emulation (qemu-user here runs single-threaded code some 5 to 20 times slower than natively, and
# threads that wait on each other far slower still) the whole suite takes over half an hour. Left out:
# the trainings on Fashion-MNIST (FashionMnist.*, minutes each) and of ResNet-50, and the mirrored
# replicas' tests (Mirrored.*: a replica thread each, 30 s to 5 min apiece); tests of targets this build
# does not make (the CUDA tests, the process-level integration tests, the samples). The rest, every
# GEMM, layer, loss, optimizer, checkpoint, step-graph and C ABI test, runs in about a minute.
skip='^(FashionMnist|Mirrored)\.|^ResNet50\.AFewSteps|_NOT_BUILT|^sample_'

# For /usr, as packages install (GNUInstallDirs gives a cross build no Debian multiarch directory: named
# here); the packages take what these targets built (nothing else is built for them).
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib/aarch64-linux-gnu -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON \
  -DKX_WITH_CUDA=OFF -DKX_WITH_BLAS=OFF -DKX_WITH_GLOO=OFF -DKX_WITH_MPI=OFF -DKX_BUILD_BENCH=OFF "$@"
cmake --build "$build_dir" --target kx fashion_mnist_c kx_unit_tests kx_capi_tests kx_contract_tests kx_keras_api_tests \
  kx_data_files_tests kx_export_logs_tests kx_first_day_tests kx_layers_by_config_tests kx_reentrancy_tests \
  kx_sizes_tests kx_disk_full_tests kx_misuse_probe kx_keras_files_tests kx-hdf5-reader
readelf -h "$build_dir"/libkx.so.*.*.* | grep -q "Machine: *AArch64" || { echo "libkx is not an aarch64 library" >&2; exit 1; }
# Idle OpenMP threads sleep instead of spinning: under emulation a spinning thread takes the core the
# working one needs. QEMU_CPU=max emulates a CPU with every feature qemu has, FEAT_BF16 among them: the
# mixed_bfloat16 GEMMs then run on the BFDOT kernel (gemm_bf16_neon.cpp).
QEMU_CPU=max OMP_WAIT_POLICY=passive ctest --test-dir "$build_dir" -E "$skip" --output-on-failure -j "$(nproc)"
# The GEMM and mixed-precision tests again on a CPU without BF16 (Cortex-A72, Armv8.0): there bfloat16
# products take the NEON FMA kernel and CpuBf16Gemm::Dot is refused.
QEMU_CPU=cortex-a72 OMP_WAIT_POLICY=passive ctest --test-dir "$build_dir" -R '^(Gemm|MixedGemm|Kernels/MixedGemmTest)\.' \
  --output-on-failure -j "$(nproc)"

bash packaging/build_arm64_deb.sh "$build_dir"
