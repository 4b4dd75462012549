#!/usr/bin/env bash
# Builds the packages, installs the .deb files on this machine (as root), compiles the installed C
# sample against them with pkg-config and with find_package(kx), runs both, runs the Python sample on
# the installed python3-kx with /usr/bin/python3 and no environment, and checks what the .rpm files
# hold and that no package contains a path of the build machine. The build tree: build-pkg/, or
# $KX_PACKAGE_BUILD (see build_packages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KX_PACKAGE_BUILD:-build-pkg}
mkdir -p "$build"
bash packaging/build_packages.sh > "$build/packages-build.log" 2>&1 || { tail -30 "$build/packages-build.log"; exit 1; }
pkgs=$PWD/$build/packages
# The version kx.h declares (CMake takes the project's from it).
part() { sed -n "s/^#define KX_VERSION_$1 \([0-9]*\).*/\1/p" capi/include/kx/kx.h; }
version="$(part MAJOR).$(part MINOR).$(part PATCH)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "packaging test: no version in kx.h ($version)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "packaging test: $*" >&2; exit 1; }

# No absolute path of this build inside any package.
for f in "$pkgs"/*.deb; do dpkg-deb -x "$f" "$tmp/extracted"; done
if grep -rl --binary-files=text "$PWD" "$tmp/extracted"; then fail "build paths inside the packages (above)"; fi
test -f "$tmp/extracted/usr/share/doc/libkx0/copyright" || fail "libkx0 has no copyright file"
test -x "$tmp/extracted/usr/lib/x86_64-linux-gnu/kx-0/kx-hdf5-reader" || fail "libkx0 lacks kx-0/kx-hdf5-reader"

# The CUDA module package needs NVIDIA's cuBLAS package, which Debian does not have: checked, not installed.
if ls "$pkgs"/libkx0-cuda_*.deb > /dev/null 2>&1; then
  contents=$(dpkg-deb -c "$pkgs"/libkx0-cuda_*.deb)
  grep -q "kx-0/libkx_cuda.so" <<< "$contents" || fail "libkx0-cuda lacks libkx_cuda.so"
fi
grep -q "libkx0 (= $version)" <<< "$(dpkg-deb -f "$pkgs/python3-kx_${version}_all.deb" Depends)" ||
  fail "python3-kx does not depend on libkx0 (= $version)"
workers_deb=()
if ls "$pkgs"/libkx0-workers_*.deb > /dev/null 2>&1; then
  grep -q "kx-0/libkx_workers.so" <<< "$(dpkg-deb -c "$pkgs"/libkx0-workers_*.deb)" || fail "libkx0-workers lacks libkx_workers.so"
  workers_deb=("$pkgs/libkx0-workers_${version}_amd64.deb")
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y --reinstall --allow-downgrades \
  "$pkgs/libkx0_${version}_amd64.deb" "$pkgs/libkx-dev_${version}_amd64.deb" "$pkgs/kx-samples_${version}_amd64.deb" \
  "$pkgs/python3-kx_${version}_all.deb" "${workers_deb[@]}" \
  > "$tmp/apt.log" || { cat "$tmp/apt.log"; fail "apt-get install"; }
test "$(readlink /usr/lib/x86_64-linux-gnu/libkx.so)" = libkx.so.0 || fail "libkx.so does not point at libkx.so.0"
# Read whole before matching: with pipefail, grep -q closing the pipe early fails objdump (SIGPIPE).
dynamic=$(objdump -p /usr/lib/x86_64-linux-gnu/libkx.so.0)
grep -q "SONAME *libkx.so.0" <<< "$dynamic" || fail "SONAME is not libkx.so.0"

data=/usr/share/datasets/fashion-mnist
# 1. pkg-config
cc -std=c99 -Wall -o "$tmp/fm_pkgconfig" /usr/share/kx/samples/c/fashion_mnist.c $(pkg-config --cflags --libs kx)
"$tmp/fm_pkgconfig" "$data" 1 "$tmp/ckpt-pkgconfig" | tail -2
# 2. find_package(kx)
cmake -S packaging/consumer -B "$tmp/consumer" -G Ninja > /dev/null
cmake --build "$tmp/consumer" > /dev/null
"$tmp/consumer/fashion_mnist" "$data" 1 "$tmp/ckpt-cmake" | tail -2
# 3. the packaged program
fashion_mnist_c "$data" 1 "$tmp/ckpt-packaged" | tail -1
# 4. the Python package: Debian's python3 imports kx from python3-kx, which finds libkx.so.0 on the
# system's library path, with no PYTHONPATH or KX_LIBRARY; then the installed Python sample trains.
nopy=(env -u PYTHONPATH -u KX_LIBRARY -u LD_LIBRARY_PATH)
(cd "$tmp" && "${nopy[@]}" /usr/bin/python3 -c 'import kx, importlib.metadata as md; print("python3-kx:", kx.__file__, kx.version(), md.version("kx"))') |
  tee "$tmp/python.log"
grep -q "/usr/lib/python3/dist-packages/kx/__init__.py $version $version" "$tmp/python.log" ||
  fail "python3-kx: import kx did not load the packaged module and library"
"${nopy[@]}" /usr/bin/python3 /usr/share/kx/samples/python/fashion_mnist.py "$data" "$tmp/ckpt-python" --epochs 1 | tail -1
# The installed libkx finds its HDF5 reader in kx-0/ (where libhdf5 is installed: it is no dependency).
if ls /usr/lib/x86_64-linux-gnu/libhdf5_serial.so.103 > /dev/null 2>&1; then
  "${nopy[@]}" /usr/bin/python3 -c 'import sys, kx; print("keras file:", kx.models.load_model(sys.argv[1]).layer_names)' \
    "$PWD/tests/fuzz/corpus/keras_file/mlp.keras" || fail "the installed libkx cannot read a .keras file"
fi
# 5. a multi-worker job on the installed engine module: the installed C sample, two workers on loopback
if ((${#workers_deb[@]})); then
  cc -std=c99 -Wall -o "$tmp/multi_worker" /usr/share/kx/samples/c/multi_worker.c $(pkg-config --cflags --libs kx)
  cluster='"worker": ["127.0.0.1:29611", "127.0.0.1:29612"]'
  for i in 0 1; do
    TF_CONFIG="{\"cluster\": {$cluster}, \"task\": {\"type\": \"worker\", \"index\": $i}}" \
      "$tmp/multi_worker" "data=$data" steps=5 samples=960 threads=1 verbose=0 > "$tmp/worker$i.log" 2>&1 &
  done
  wait -n || { cat "$tmp"/worker*.log; fail "a packaged multi-worker job failed"; }
  wait -n || { cat "$tmp"/worker*.log; fail "a packaged multi-worker job failed"; }
  grep -h "last epoch loss" "$tmp"/worker*.log
fi

# The RPMs hold the expected files (lib64 layout).
expect_rpm() {
  local rpm=$1; shift
  local list
  list=$(rpm -qpl "$pkgs/$rpm")
  for f in "$@"; do grep -qx "$f" <<< "$list" || fail "$rpm lacks $f (has: $list)"; done
  echo "$rpm: ${*}"
}
expect_rpm "libkx0-${version}-1.x86_64.rpm" /usr/lib64/libkx.so.0 "/usr/lib64/libkx.so.${version}" /usr/lib64/kx-0/kx-hdf5-reader
expect_rpm "libkx-devel-${version}-1.x86_64.rpm" /usr/include/kx/kx.h /usr/lib64/libkx.so /usr/lib64/pkgconfig/kx.pc \
  /usr/lib64/cmake/kx/kxConfig.cmake
expect_rpm "kx-samples-${version}-1.x86_64.rpm" /usr/bin/fashion_mnist_c /usr/share/kx/samples/c/fashion_mnist.c
if ls "$pkgs"/libkx0-workers-*.rpm > /dev/null 2>&1; then
  expect_rpm "libkx0-workers-${version}-1.x86_64.rpm" /usr/lib64/kx-0/libkx_workers.so
fi
if ls "$pkgs"/libkx0-cuda-*.rpm > /dev/null 2>&1; then
  expect_rpm "libkx0-cuda-${version}-1.x86_64.rpm" /usr/lib64/kx-0/libkx_cuda.so
fi
echo "packaging test: passed"
