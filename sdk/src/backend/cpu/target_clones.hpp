// KX_CLONES: on x86-64 with GCC, a function marked with it is compiled three times (AVX-512, AVX2,
// baseline) and the loader picks the best for the CPU, so element-wise loops run at full vector width
// in a library built for baseline x86-64. KX_CLONES_AVX2 stops at AVX2: for loops bound by memory
// bandwidth, whose AVX-512 clone would be several times larger and no faster, and for the element-wise
// exp/tanh loops, whose AVX-512 clones would cost libkx more bytes than its size budget leaves
// (tests/check_library_size.cmake). Elsewhere both expand to nothing.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KX_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define KX_CLONES_AVX2 __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KX_CLONES
#define KX_CLONES_AVX2
#endif
