#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/), writes a seed corpus of valid kx files and
# fuzzes the checkpoint loader for FUZZ_SECONDS (default 60), then each data reader (.npy, CSV,
# images) for FUZZ_DATA_SECONDS (default 20) from seeds numpy and the test image writer make, then
# each loader of issue 30 (Keras JSON configs, IDX files, load_weights, resume metadata) and Keras's
# .keras / .h5 files (issue 32; seeds made by Keras 3; libhdf5 parses them in kx-hdf5-reader, so its
# crashes must come back as errors) and the reader's stream (seeds: its streams of those files) for
# FUZZ_NEW_SECONDS (default 60) from seeds fuzz_loader_seed_writer makes and the crafted inputs of
# tests/fuzz/corpus/<target>/. The fuzzers run side by side, one per core. Needs the packages of
# scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
data_seconds=${FUZZ_DATA_SECONDS:-20}
new_seconds=${FUZZ_NEW_SECONDS:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKX_FUZZ=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DKX_BUILD_TESTS=OFF -DKX_BUILD_SAMPLES=OFF -DKX_BUILD_BENCH=OFF -DKX_WITH_CUDA=OFF
data_targets=(fuzz_npy_reader fuzz_csv_reader)
# The image reader exists when the build found libjpeg and libpng (KX_WITH_IMAGES).
if cmake --build build-fuzz --target help | grep -q 'fuzz_image_reader'; then images=1; else images=0; fi
if ((images)); then data_targets+=(fuzz_image_reader); fi
loader_targets=(fuzz_model_json fuzz_idx_reader fuzz_load_weights fuzz_resume fuzz_keras_file fuzz_hdf5_stream)
cmake --build build-fuzz --target fuzz_checkpoint_loader fuzz_seed_writer "${data_targets[@]}" \
  "${loader_targets[@]}" fuzz_loader_seed_writer $( ((images)) && echo fuzz_image_seed_writer)
corpus=build-fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus"

# Each fuzzer is one process on one core: run as many at once as there are cores, each with its own
# log, printed whole when it ends; the first failure stops the script (after the others end).
logs=build-fuzz/logs
rm -rf "$logs" && mkdir -p "$logs"
running=0
failed=0
declare -A log_of
finish_one() {
  local rc=0 done_pid
  wait -n -p done_pid || rc=$?
  running=$((running - 1))
  cat "${log_of[$done_pid]}"
  if ((rc != 0)); then echo "FUZZ FAILURE (exit $rc): $(head -1 "${log_of[$done_pid]}")"; failed=1; fi
}
# fuzz TARGET SECONDS CORPUS [environment assignments...]
fuzz() {
  local target=$1 secs=$2 dir=$3
  shift 3
  while ((running >= $(nproc))); do finish_one; done
  local log="$logs/$target.log"
  echo "fuzzing ${target#fuzz_} for ${secs}s from $(ls "$dir" | wc -l) seeds" > "$log"
  env "$@" "./build-fuzz/tests/fuzz/$target" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$dir" >> "$log" 2>&1 &
  log_of[$!]=$log
  running=$((running + 1))
}
ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/tests/fuzz/fuzz_seed_writer "$corpus"
fuzz fuzz_checkpoint_loader "$seconds" "$corpus" ASAN_OPTIONS=detect_leaks=1

# Seeds for the data readers: numpy's own .npy files of each dtype and version, a few CSV tables.
mkdir -p "$corpus-npy" "$corpus-csv" "$corpus-image_reader"
rm -f "$corpus-npy"/* "$corpus-csv"/* "$corpus-image_reader"/*
if ((images)); then ./build-fuzz/tests/fuzz/fuzz_image_seed_writer "$corpus-image_reader"; fi
/usr/bin/python3 - "$corpus-npy" "$corpus-csv" <<'PY'
import sys, numpy as np
npy, csv = sys.argv[1], sys.argv[2]
for i, t in enumerate(['<f4', '<f8', '|u1', '<i4', '<i8']):
    for v in [(1, 0), (2, 0), (3, 0)]:
        with open(f'{npy}/seed-{i}-{v[0]}.npy', 'wb') as f:
            np.lib.format.write_array(f, np.arange(12).reshape(3, 2, 2).astype(t), version=v)
open(f'{csv}/seed-0.csv', 'w').write('a,b,label\n1,2.5,0\n-3e2,"4",1\n')
open(f'{csv}/seed-1.csv', 'w').write('"x ""1""",y\r\n+1,.5\r\n\r\n7,8\r\n')
PY
for t in "${data_targets[@]}"; do
  case $t in fuzz_npy_reader) c="$corpus-npy" ;; fuzz_csv_reader) c="$corpus-csv" ;; *) c="$corpus-${t#fuzz_}" ;; esac
  fuzz "$t" "$data_seconds" "$c" ASAN_OPTIONS=detect_leaks=1
done

# The loaders of issue 30, each from the seed writer's valid files and the crafted inputs kept in
# tests/fuzz/corpus/<target>/ (an IDX header that claims 8.6 GB, a checkpoint at INT64_MAX steps ...).
rm -rf "$corpus-loaders"
ASAN_OPTIONS=detect_leaks=0 ./build-fuzz/tests/fuzz/fuzz_loader_seed_writer "$corpus-loaders"
# The HDF5 reader's streams of Keras's files: the seeds of its parser in libkx.
mkdir -p "$corpus-loaders/hdf5_stream"
for f in tests/fuzz/corpus/keras_file/*.h5; do
  ./build-fuzz/kx-hdf5-reader --size "$(stat -c %s "$f")" --memory 0 --cpu-seconds 30 < "$f" \
    > "$corpus-loaders/hdf5_stream/$(basename "$f").stream"
done
for t in "${loader_targets[@]}"; do
  c="$corpus-loaders/${t#fuzz_}"
  mkdir -p "$c"
  if [[ -d "tests/fuzz/corpus/${t#fuzz_}" ]]; then cp "tests/fuzz/corpus/${t#fuzz_}"/* "$c"/; fi
  # Keras's files go through the reader program as in libkx: libhdf5 1.10.8 crashes on some damaged
  # files (a SEGV in H5HG_read on a corrupted global heap), and that must be a kx::Error here.
  fuzz "$t" "$new_seconds" "$c" KX_HDF5_READER="$PWD/build-fuzz/kx-hdf5-reader" ASAN_OPTIONS=detect_leaks=1
done
while ((running > 0)); do finish_one; done
if ((failed)); then exit 1; fi
