// What the AVX2 kernels share: the target attribute and the mask of a span's last lanes. Included only
// by files that compile their AVX2 functions with KX_AVX2_FMA and call them on CPUs that have AVX2 and
// FMA (cpu_has_avx2_fma()).
#pragma once
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#define KX_AVX2_FMA __attribute__((target("avx2,fma")))

namespace kx::backend::cpu {

// Lanes [0, left) of 8 set, for VMASKMOVPS. Only for a span's last values: AMD's masked store is many
// times slower than a plain one.
KX_AVX2_FMA inline __m256i tail_mask_avx2(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace kx::backend::cpu
#endif
