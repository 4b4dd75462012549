#!/usr/bin/env bash
# The edge footprint: stripped sizes of libkx and of the CUDA module, what libkx links, and the tiny
# MLP's first step after main() and peak RSS (bench_footprint, median of --runs) with the CUDA module
# present and hidden.
#
#   bench/footprint.sh [--build DIR] [--libkx-dir DIR] [--module PATH] [--runs N] [--threads N]
#
# --build: the build tree holding bench/bench_footprint (default build). --libkx-dir: run the same
# program against the libkx.so.* in DIR instead (another build of the same ABI, e.g. an older commit).
# --module: the libkx_cuda.so to offer as "present" (default: the build tree's, when it has one).
set -euo pipefail
build=build libkx_dir="" module="" runs=5 threads=2
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --libkx-dir) libkx_dir=$2; shift 2 ;;
    --module) module=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
program=$build/bench/bench_footprint
[[ -x $program ]] || { echo "no $program: configure with -DKX_BUILD_BENCH=ON and build bench_footprint" >&2; exit 1; }
libkx_dir=${libkx_dir:-$build}
libkx=$(ls "$libkx_dir"/libkx.so.*.*.* | head -1)
[[ -n $module ]] || module=$build/libkx_cuda.so

stripped_kb() {
  local tmp
  tmp=$(mktemp)
  strip --strip-unneeded -o "$tmp" "$1"
  echo "$(( $(stat -c %s "$tmp") / 1024 )) kB stripped ($(( $(stat -c %s "$1") / 1024 )) kB as built)"
  rm -f "$tmp"
}
echo "libkx: $libkx: $(stripped_kb "$libkx")"
echo "  links: $(readelf -d "$libkx" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
echo "  loads: $(LD_LIBRARY_PATH=$libkx_dir ldd "$libkx" | awk '{print $1}' | grep -v -e '^linux-vdso' -e '^/' | tr '\n' ' ')"
if [[ -f $module ]]; then
  echo "CUDA module: $module: $(stripped_kb "$module")"
else
  echo "CUDA module: none at $module (the 'present' runs below are then the same as 'hidden')"
fi

# Median of one key over the runs' lines.
median() { grep -oE "(^| )$1=[0-9.]+" | cut -d= -f2 | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
run() {
  local label=$1 module_path=$2 lines
  lines=$(for ((i = 0; i < runs; i++)); do
    KX_FOOTPRINT_LAUNCH_US=${EPOCHREALTIME/./} KX_CUDA_MODULE=$module_path LD_LIBRARY_PATH=$libkx_dir \
      "$program" --threads "$threads"
  done)
  printf '%-16s first step %6s ms after main(), %s ms after launch (strategy %s, compile %s, step %s), peak RSS %s kB, CUDA devices %s\n' \
    "$label" "$(median first_step_ms <<<"$lines")" "$(median since_launch_ms <<<"$lines")" "$(median strategy_ms <<<"$lines")" \
    "$(median compile_ms <<<"$lines")" "$(median step_ms <<<"$lines")" "$(median peak_rss_kb <<<"$lines")" \
    "$(median cuda_devices <<<"$lines")"
}
echo "tiny MLP (784-64-10, batch 32, $threads threads), median of $runs runs:"
run "module present:" "$module"
run "module hidden:" /nonexistent/libkx_cuda.so
KX_CUDA_MODULE=$module LD_LIBRARY_PATH=$libkx_dir "$program" --threads "$threads" --status | sed -n 's/^cuda: /  CUDA status (present): /p'
