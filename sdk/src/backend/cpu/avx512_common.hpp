// What the AVX-512 GEMM kernels share: the target attribute, rounding a vector to a 16-bit type, and
// storing a tile's accumulators through the epilogue (bias, beta, ReLU, rounding). Included only by
// files that compile their AVX-512 functions with KX_AVX512 and call them on CPUs that have it.
#pragma once
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/backend.hpp"

#define KX_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,fma")))

namespace kx::backend::cpu {

// x rounded as rounding_math.hpp rounds it (round_bfloat16 / round_float16), lane by lane.
KX_AVX512 inline __m512 round_vector(__m512 x, Rounding r) {
  if (r == Rounding::Float16) return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (r != Rounding::BFloat16) return x;
  const __m512i b = _mm512_castps_si512(x);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_and_si512(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), high);
  const __m512i quiet_nan = _mm512_and_si512(_mm512_or_si512(b, _mm512_set1_epi32(0x00400000)), high);
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), quiet_nan));
}

// C row r, vector v of a tile: act(acc + bias + beta * C), rounded, stored under mask m.
struct TileStore {
  float beta;
  bool relu;
  Rounding rounding;
  KX_AVX512 void operator()(float* c, __mmask16 m, __m512 acc, __m512 bias) const {
    __m512 x = _mm512_add_ps(acc, bias);
    if (beta != 0.0f) x = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, c), x);
    // MAXPS returns its second operand when either is NaN: x second keeps a NaN (relu(NaN) is NaN).
    if (relu) x = _mm512_max_ps(_mm512_setzero_ps(), x);
    _mm512_mask_storeu_ps(c, m, round_vector(x, rounding));
  }
};

}  // namespace kx::backend::cpu
#endif
