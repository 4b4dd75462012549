#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/), writes a seed corpus of valid kx files and
# fuzzes the checkpoint loader for FUZZ_SECONDS (default 60). Needs the packages of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKX_FUZZ=ON \
  -DKX_BUILD_TESTS=OFF -DKX_BUILD_SAMPLES=OFF -DKX_BUILD_BENCH=OFF -DKX_WITH_CUDA=OFF
cmake --build build-fuzz --target fuzz_checkpoint_loader fuzz_seed_writer
corpus=build-fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus"
ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/tests/fuzz/fuzz_seed_writer "$corpus"
echo "fuzzing the checkpoint loader for ${seconds}s from $(ls "$corpus" | wc -l) seeds"
ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/tests/fuzz/fuzz_checkpoint_loader -max_total_time="$seconds" \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$corpus"
