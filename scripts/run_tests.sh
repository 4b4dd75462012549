#!/usr/bin/env bash
# Set up, build and run every test: once as built for users, once under AddressSanitizer + UBSan, then
# fuzz the checkpoint loader, the data readers and the other loaders.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# ctest runs as many tests at once as there are cores, and each test's OpenMP threads would spin while
# they wait, taking the core another test's threads need: passive waiting ran the suite in 125 s, not
# 223 s (a kill-and-resume test: 5 s instead of 50). Programs of users keep libgomp's default.
export OMP_WAIT_POLICY=passive
# A line per phase with the seconds since the start, so a log shows where CI's time goes.
phase() { echo "== [run_tests ${SECONDS} s] $*"; }

phase "setup and the Release build"
bash scripts/setup.sh build
# The real Keras 3 (pinned) for the Keras-file tests (python_keras_files).
phase "the Keras environment"
bash scripts/python_venv.sh keras build/keras-venv
phase "ctest (Release)"
ctest --test-dir build --output-on-failure -j "$jobs"

# Line tables only (-g1): the sanitizers' reports still name file and line, and the build is a quarter
# faster than with full debug information. -O1, as AddressSanitizer's documentation advises: it compiles
# in about two thirds of -O2's time. GCC 12 then warns "may be used uninitialized" inside libstdc++'s
# <regex>; the Release build above keeps that warning on for kx's code. Full debug information in the C
# ABI's files (KX_ABI_DWARF): the ABI check below reads this build's libkx.
phase "the AddressSanitizer + UBSan build"
asan_flags="-O1 -g1 -DNDEBUG -Wno-maybe-uninitialized"
bash scripts/setup.sh build-asan -DKX_WITH_CUDA=OFF -DKX_SANITIZE=ON -DKX_ABI_DWARF=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKX_BUILD_BENCH=OFF \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$asan_flags" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$asan_flags"
# Leak checks on (OpenMP's thread pool lives for the process and is not a leak of kx's); an allocation too
# large to exist returns NULL, as without the sanitizer, so out-of-memory paths are tested too.
# Left out here, run in the build above: the Fashion-MNIST accuracy trainings, the 50,000-sample
# mirrored epoch, the 200 mirrored steps against one device, the parameter servers' network
# partition, and the two multi-worker fits that kill and restart workers or compare four processes
# bitwise (the longest under the sanitizers, 40 s to a few minutes each, through the same code as
# shorter tests that do run here: MultiWorkerStepwise, ResumeAfterKill, the other MultiWorkerFit tests).
phase "ctest (AddressSanitizer + UBSan)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" \
  -E '^FashionMnist\.|^Mirrored\.UnevenEpochOf50000|^Mirrored\.ReplicasComputeTheUpdateOfOneDevice$|^ParameterServer\.NetworkPartitionDropsTheCutOffWorker$|^MultiWorkerFit\.(AKilledWorkerStopsTheOthersAndARestartResumes|WorkersTrainAsTheSameReplicasInOneProcessAndRepeatBitwise)$'

# The checkpoint loader (20 s), each data reader (8 s) and each loader of issue 30 (20 s: JSON
# configs, IDX, load_weights, resume metadata, Keras files) under libFuzzer (clang), from seed corpora;
# the whole CI run stays under 40 minutes on 2 cores.
phase "fuzzing"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} FUZZ_DATA_SECONDS=${FUZZ_DATA_SECONDS:-8} FUZZ_NEW_SECONDS=${FUZZ_NEW_SECONDS:-20} \
  bash scripts/run_fuzz.sh

# The .deb packages installed on this machine, the C sample built against them (pkg-config and
# find_package) and run; the .rpm contents listed and checked. They are made from the Release build
# above (reconfigured for /usr, without tests: its objects are the packages' own).
phase "packages"
KX_PACKAGE_BUILD=build bash packaging/test_packages.sh

# The ABI guard: libkx against the committed baseline abi/libkx.abi (libabigail), from the DWARF of the
# sanitizer build.
phase "ABI"
KX_ABI_BUILD=build-asan bash abi/check_abi.sh

# The aarch64 cross build (cmake/aarch64-linux-gnu.cmake): the CPU suite but its longest trainings under
# qemu-user, there with the NEON GEMM, and the arm64 .deb packages checked with dpkg-deb.
phase "aarch64"
bash scripts/run_aarch64_tests.sh build-aarch64
phase "done"
