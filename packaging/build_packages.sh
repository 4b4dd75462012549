#!/usr/bin/env bash
# Builds the .deb packages (Debian's multiarch libdir) and the .rpm packages (lib64) from one build
# tree, configured for /usr: build-pkg/, or $KX_PACKAGE_BUILD (run_tests.sh passes its Release build,
# whose objects are the packages' own, so nothing is compiled twice). Packages land in <tree>/packages/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KX_PACKAGE_BUILD:-build-pkg}
configure() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DKX_BUILD_TESTS=OFF \
    -DKX_BUILD_BENCH=OFF "$@" > "$build.configure.log"
}
mkdir -p "$build"
rm -rf "$build/packages"
configure -UCMAKE_INSTALL_LIBDIR
cmake --build "$build"
(cd "$build" && cpack -G DEB)
# Only the install paths change: nothing is recompiled. The Python package (python3-kx) follows
# Debian's layout (/usr/lib/python3/dist-packages) and is built as a .deb only.
configure -DCMAKE_INSTALL_LIBDIR=lib64 -DKX_PACKAGE_PYTHON=OFF
(cd "$build" && cpack -G RPM)
configure -UCMAKE_INSTALL_LIBDIR -DKX_PACKAGE_PYTHON=ON
ls "$build/packages"/*.deb "$build/packages"/*.rpm
