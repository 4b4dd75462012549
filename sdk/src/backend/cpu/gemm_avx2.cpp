// AVX2 register-tile kernel, for x86-64 CPUs with AVX2 and FMA but no AVX-512 (AMD before Zen 4, most
// Intel desktop parts). Sixteen ymm registers cannot hold the driver's 8-row tile: it is computed as
// chunks of 4 rows by up to 24 columns (12 accumulators, B's 3 vectors and A's broadcast). A chunk of
// fewer rows repeats the tile's last row of A and stores only its own rows, as the AVX-512 kernel does.
// Built with per-function target attributes and chosen at run time only on CPUs that have AVX2 and FMA.
#include <algorithm>

#include "backend/cpu/gemm.hpp"
#include "backend/rounding_math.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "backend/cpu/avx2_common.hpp"

namespace kx::backend::cpu {
namespace {

constexpr int kChunkRows = 4;
constexpr int kLanes = 8;

// C's values of a chunk from its sums [4 rows][nv vectors], as the AVX-512 kernel forms them: (sum +
// bias), then + beta * C fused, then ReLU, then the rounding; the last vector's first `tail` columns
// only. One loop for every chunk shape, out of line: unrolled into each kernel it cost libkx kilobytes.
// Masked loads and stores only where the columns end: AMD's masked store is many times slower.
[[gnu::noinline]] KX_AVX2_FMA void store_chunk(const Tile& t, int row0, int col0, const __m256* sums, int nv,
                                               int tail) {
  const __m256i last = tail_mask_avx2(tail);
  const auto masked = [&](int v) { return v == nv - 1 && tail < kLanes; };
  const auto load = [&](const float* p, int v) KX_AVX2_FMA {
    return masked(v) ? _mm256_maskload_ps(p, last) : _mm256_loadu_ps(p);
  };
  const __m256 beta = _mm256_set1_ps(t.beta);
  const int rows = std::min(kChunkRows, t.rows - row0), cols = (nv - 1) * kLanes + tail;
  for (int r = 0; r < rows; ++r) {
    float* c = t.C + (row0 + r) * t.ldc + col0;
    for (int v = 0; v < nv; ++v) {
      __m256 x = _mm256_add_ps(sums[r * nv + v], t.bias ? load(t.bias + col0 + kLanes * v, v) : _mm256_setzero_ps());
      if (t.beta != 0.0f) x = _mm256_fmadd_ps(beta, load(c + kLanes * v, v), x);
      // MAXPS returns its second operand when either is NaN: x second keeps a NaN (relu(NaN) is NaN).
      if (t.relu) x = _mm256_max_ps(_mm256_setzero_ps(), x);
      if (masked(v)) _mm256_maskstore_ps(c + kLanes * v, last, x);
      else _mm256_storeu_ps(c + kLanes * v, x);
    }
    if (t.rounding != Rounding::None)  // a mixed-precision layer's output is stored as a 16-bit value
      for (int j = 0; j < cols; ++j) c[j] = round_value(c[j], t.rounding);
  }
}

// C[row0 .. row0 + 4, col0 .. col0 + NV * 8) of the tile, the last vector masked to the tile's columns
// when Masked. The mask would be a seventeenth register in the k loop: chunks whose columns fill their
// vectors (every one of a width that is a multiple of 8) run without it.
template <int NV, bool Masked>
KX_AVX2_FMA void chunk_kernel(const Tile& t, int row0, int col0) {
  constexpr int MR = kChunkRows;
  const int tail = std::min(t.cols - col0, NV * kLanes) - (NV - 1) * kLanes;  // 1 .. 8 columns
  const __m256i last = tail_mask_avx2(tail);
  const float* rows[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) rows[r] = t.A + std::min(row0 + r, t.rows - 1) * t.rsa;

  __m256 acc[MR][NV];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  const float* b = t.B + col0;
  const int64_t K = t.K, ldb = t.ldb, csa = t.csa;
  for (int64_t ka = 0; ka < K * csa; ka += csa, b += ldb) {
    __m256 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bv[v] = Masked && v == NV - 1 ? _mm256_maskload_ps(b + kLanes * v, last) : _mm256_loadu_ps(b + kLanes * v);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(rows[r] + ka);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }

  // A whole chunk with nothing to add or apply (a convolution before batch normalisation, most gradients)
  // is stored straight from the registers; any other leaves them once, for the shared epilogue.
  if (!Masked && row0 + MR <= t.rows && t.beta == 0.0f && !t.bias && !t.relu && t.rounding == Rounding::None) {
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v)  // + 0 as store_chunk adds it: a sum of -0 is stored as +0
        _mm256_storeu_ps(t.C + (row0 + r) * t.ldc + col0 + kLanes * v, _mm256_add_ps(acc[r][v], _mm256_setzero_ps()));
    return;
  }
  __m256 sums[MR * NV];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) sums[r * NV + v] = acc[r][v];
  store_chunk(t, row0, col0, sums, NV, Masked ? tail : kLanes);
}

template <int NV>
KX_AVX2_FMA void chunk_columns(const Tile& t, int row0, int col0) {
  if (t.cols - col0 >= NV * kLanes) chunk_kernel<NV, false>(t, row0, col0);
  else chunk_kernel<NV, true>(t, row0, col0);
}

KX_AVX2_FMA void tile_any(const Tile& t) {
  constexpr int kChunkCols = 3 * kLanes;
  for (int col0 = 0; col0 < t.cols; col0 += kChunkCols) {
    const int left = t.cols - col0;
    for (int row0 = 0; row0 < t.rows; row0 += kChunkRows) {
      if (left > 2 * kLanes) chunk_columns<3>(t, row0, col0);
      else if (left > kLanes) chunk_columns<2>(t, row0, col0);
      else chunk_columns<1>(t, row0, col0);
    }
  }
}

}  // namespace

bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

TileKernel tile_avx2() { return cpu_has_avx2_fma() ? &tile_any : nullptr; }

}  // namespace kx::backend::cpu

#else

namespace kx::backend::cpu {
bool cpu_has_avx2_fma() { return false; }
TileKernel tile_avx2() { return nullptr; }
}  // namespace kx::backend::cpu

#endif
