#!/usr/bin/env bash
# The arm64 .deb packages (libkx0, libkx-dev, kx-samples) from the aarch64 cross build that
# scripts/run_aarch64_tests.sh configured and built, checked with dpkg-deb: arm64, and libkx.so.0 an
# AArch64 library in Debian's arm64 multiarch directory. Packages land in BUILD_DIR/packages/.
#
#   packaging/build_arm64_deb.sh [BUILD_DIR]    (default build-aarch64)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-aarch64}
fail() { echo "arm64 packages: $*" >&2; exit 1; }
[[ -f $build/CMakeCache.txt ]] || fail "no cross build in $build: run scripts/run_aarch64_tests.sh first"
grep -q "^CMAKE_INSTALL_PREFIX:PATH=/usr$" "$build/CMakeCache.txt" || fail "$build is not configured for /usr"

rm -rf "$build/packages"
(cd "$build" && cpack -G DEB > cpack.log 2>&1) || { tail -30 "$build/cpack.log"; fail "cpack"; }
deb=$(ls "$build"/packages/libkx0_*_arm64.deb) || fail "no libkx0 arm64 package in $build/packages"
dpkg-deb --info "$deb"
contents=$(dpkg-deb --contents "$deb")
echo "$contents"
[[ $(dpkg-deb --field "$deb" Architecture) == arm64 ]] || fail "$deb is not for arm64"
grep -q "/usr/lib/aarch64-linux-gnu/libkx.so.0 -> " <<<"$contents" || fail "no libkx.so.0 link in /usr/lib/aarch64-linux-gnu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
readelf -h "$tmp"/usr/lib/aarch64-linux-gnu/libkx.so.0 | grep -q "Machine: *AArch64" || fail "libkx.so.0 in $deb is not an AArch64 library"
for other in "$build"/packages/libkx-dev_*_arm64.deb "$build"/packages/kx-samples_*_arm64.deb; do
  [[ -f $other ]] || fail "missing $(basename "$other")"
  dpkg-deb -x "$other" "$tmp"
done
if grep -rl --binary-files=text "$PWD" "$tmp"; then fail "build paths inside the packages (above)"; fi
ls -l "$build"/packages/*.deb
