#!/usr/bin/env bash
# The ABI guard: libkx's ABI (kx.h's functions and types, from DWARF, by libabigail) against the
# baseline abi/libkx.abi. kx's rules allow adding functions, enumerators and struct members at the
# end; anything else fails: abidiff's incompatible bit, or a report of a removal, a moved or changed
# member, a changed parameter or return type, a changed enumerator. `check_abi.sh --update`
# rewrites the baseline (at a release).
set -euo pipefail
cd "$(dirname "$0")/.."
# KX_ABI_BUILD: a build configured with -DKX_ABI_DWARF=ON to read instead of building one (CI reads its
# sanitizer build: the DWARF of kx.h's types does not change with the optimisation level or the
# sanitizers, and the library is not compiled a fifth time).
build=${KX_ABI_BUILD:-build-abi}
if [[ -n "${KX_ABI_BUILD:-}" ]]; then
  grep -q '^KX_ABI_DWARF:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null \
    || { echo "ABI check: $build was not configured with -DKX_ABI_DWARF=ON" >&2; exit 1; }
  cmake --build "$build" --target kx > "$build/abi-build.log" 2>&1 || { tail -30 "$build/abi-build.log"; exit 1; }
else
  # Unoptimised, with debug information only where kx.h's functions are defined (capi/src): that DWARF
  # is all libabigail reads, it is the same at every optimisation level, and the library builds in a
  # fraction of the time.
  mkdir -p "$build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DKX_ABI_DWARF=ON -DKX_WITH_CUDA=OFF -DKX_BUILD_TESTS=OFF \
    -DKX_BUILD_SAMPLES=OFF -DKX_BUILD_BENCH=OFF > "$build/configure-and-build.log" 2>&1 || { cat "$build/configure-and-build.log"; exit 1; }
  cmake --build "$build" --target kx >> "$build/configure-and-build.log" 2>&1 || { tail -30 "$build/configure-and-build.log"; exit 1; }
fi
current="$build/libkx.abi"
# Only what kx.h declares, without paths or DT_NEEDED (they differ between machines).
abidw --exported-interfaces-only --headers-dir capi/include/kx --drop-private-types --no-corpus-path \
  --no-show-locs --no-comp-dir-path --no-elf-needed --out-file "$current" "$build/libkx.so.0"
if [[ "${1:-}" == "--update" ]]; then
  cp "$current" abi/libkx.abi
  echo "abi/libkx.abi updated"
  exit 0
fi
set +e
abidiff --no-show-locs abi/libkx.abi "$current" > "$build/abidiff.txt" 2>&1
rc=$?
set -e
cat "$build/abidiff.txt"
if (( rc & 3 )); then echo "ABI check: abidiff failed (exit $rc)"; exit 1; fi
breaking="[1-9][0-9]* Removed|offset changed|data member deletion|data member change|of type '[^']*' changed:|"
breaking+='return type changed|enumerator deletion|value changed|parameter .*deletion|name changed'
# "no data member changes (N filtered)": abidiff judged those harmless (an enum that gained enumerators).
if (( rc & 8 )) || grep -v "no data member changes" "$build/abidiff.txt" | grep -Eq "$breaking"; then
  echo "ABI check: incompatible change against abi/libkx.abi (above)"
  exit 1
fi
if (( rc & 4 )); then echo "ABI check: compatible changes (additions); run abi/check_abi.sh --update at release"; fi
echo "ABI check: passed"
