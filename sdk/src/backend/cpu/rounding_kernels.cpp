// Rounding to bfloat16 and float16 (rounding_math.hpp): AVX-512 vectors where the CPU has them (float16
// through its conversion instructions, which round the same way), the shared scalar formula elsewhere.
#include "backend/cpu/rounding_kernels.hpp"

#include "backend/cpu/avx512_common.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/target_clones.hpp"
#include "backend/rounding_math.hpp"

namespace kx::backend::cpu {
namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no such warning, and warns about the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
KX_AVX512 void round_avx512(Rounding r, int64_t n, const float* x, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, round_vector(_mm512_loadu_ps(x + i), r));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, round_vector(_mm512_maskz_loadu_ps(m, x + i), r));
  }
}
#pragma GCC diagnostic pop

#else
void round_avx512(Rounding, int64_t, const float*, float*) {}
#endif

}  // namespace

void round_span(Rounding r, int64_t n, const float* x, float* y) {
  if (r == Rounding::None) {
    if (x != y)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
    return;
  }
  if (cpu_has_avx512()) return round_avx512(r, n, x, y);
  if (r == Rounding::BFloat16)
    for (int64_t i = 0; i < n; ++i) y[i] = round_bfloat16(x[i]);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = round_float16(x[i]);
}

KX_CLONES_AVX2 bool all_finite(int64_t n, const float* x) {
  uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) bad |= (float_bits(x[i]) & 0x7F800000u) == 0x7F800000u;
  return bad == 0;
}

}  // namespace kx::backend::cpu
