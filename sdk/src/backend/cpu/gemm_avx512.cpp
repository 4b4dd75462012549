// AVX-512 register-tile kernel: up to 8 rows x 32 columns of C held in 16 zmm accumulators. Built with
// per-function target attributes (not file-wide flags) so nothing else in this file needs AVX-512, and
// chosen at run time only on CPUs that have it.
#include "backend/cpu/gemm.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's own intrinsics header trips -Wmaybe-uninitialized in masked loads (_mm512_undefined_ps).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace kx::backend::cpu {
namespace {

#define KX_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,fma")))

template <int MR, int NV>
KX_AVX512 void tile_kernel(const Tile& t) {
  // Columns beyond t.cols are masked off in the last vector; NV * 16 >= t.cols > (NV - 1) * 16.
  const int tail = t.cols - (NV - 1) * 16;
  const __mmask16 last = static_cast<__mmask16>(tail >= 16 ? 0xFFFF : (1u << tail) - 1u);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

  const float* a = t.A;
  const float* b = t.B;
  for (int64_t k = 0; k < t.K; ++k, a += t.csa, b += t.ldb) {
    __m512 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      bv[v] = (v == NV - 1) ? _mm512_maskz_loadu_ps(last, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * t.rsa]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }

  __m512 bias[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v)
    bias[v] = t.bias ? _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xFFFF, t.bias + 16 * v) : _mm512_setzero_ps();
  const __m512 beta = _mm512_set1_ps(t.beta);
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* c = t.C + r * t.ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = (v == NV - 1) ? last : 0xFFFF;
      __m512 x = _mm512_add_ps(acc[r][v], bias[v]);
      if (t.beta != 0.0f) x = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m, c + 16 * v), x);
      if (t.relu) x = _mm512_max_ps(x, zero);
      _mm512_mask_storeu_ps(c + 16 * v, m, x);
    }
  }
}

template <int MR>
KX_AVX512 void tile_rows(const Tile& t) {
  if (t.cols > 16)
    tile_kernel<MR, 2>(t);
  else
    tile_kernel<MR, 1>(t);
}

KX_AVX512 void tile_any(const Tile& t) {
  switch (t.rows) {
    case 8: return tile_rows<8>(t);
    case 7: return tile_rows<7>(t);
    case 6: return tile_rows<6>(t);
    case 5: return tile_rows<5>(t);
    case 4: return tile_rows<4>(t);
    case 3: return tile_rows<3>(t);
    case 2: return tile_rows<2>(t);
    default: return tile_rows<1>(t);
  }
}

}  // namespace

TileKernel tile_avx512() {
  __builtin_cpu_init();
  const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
  return ok ? &tile_any : nullptr;
}

}  // namespace kx::backend::cpu

#pragma GCC diagnostic pop

#else

namespace kx::backend::cpu {
TileKernel tile_avx512() { return nullptr; }
}  // namespace kx::backend::cpu

#endif
