# Cross build for 64-bit Arm Linux (Jetson, Graviton, Raspberry Pi 4/5) with Debian's
# g++-aarch64-linux-gnu. Libraries and headers come from the cross toolchain's own root
# (/usr/aarch64-linux-gnu) and from Debian multiarch packages (zlib1g-dev:arm64, libgtest-dev:arm64 in
# /usr/lib/aarch64-linux-gnu); tests run under qemu-user (scripts/run_aarch64_tests.sh).
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DKX_WITH_BLAS=OFF ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Find target libraries only under these roots ("/" for multiarch: /usr/lib/aarch64-linux-gnu),
# programs (nm, python3) on the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/include/x86_64-linux-gnu)

# ctest and gtest_discover_tests run the target's programs through qemu-user: -L gives it the
# toolchain's loader, and LD_LIBRARY_PATH its C library too. Without it the loader takes the C library
# of libc6:arm64 (which zlib1g-dev:arm64 installs) from the host's ld.so.cache: a loader and a C
# library of two builds, and the first pthread_create never returns.
find_program(KX_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(KX_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KX_QEMU_AARCH64} -L /usr/aarch64-linux-gnu
                                    -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
endif()
