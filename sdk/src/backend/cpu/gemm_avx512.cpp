// AVX-512 register-tile kernel: 8 rows x up to 48 columns of C held in up to 24 zmm accumulators. Built with
// per-function target attributes (not file-wide flags) so nothing else in this file needs AVX-512, and
// chosen at run time only on CPUs that have it.
#include "backend/cpu/gemm.hpp"
#include "backend/rounding_math.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's own intrinsics header trips -Wmaybe-uninitialized in masked loads (_mm512_undefined_ps).
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no such warning, and warns about the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "backend/cpu/avx512_common.hpp"

namespace kx::backend::cpu {
namespace {

constexpr int64_t kPrefetchRows = 32;

// The tile kernel also asks for lines it is about to write (PREFETCHW, which every CPU with AVX-512 has).
#define KX_AVX512_PREFETCHW __attribute__((target("avx512f,avx512vl,avx512dq,fma,prfchw")))

// One register tile of kTileRows rows, NV vectors wide. A tile with fewer rows repeats its last row of
// A in the rest, computes them and stores only its own: one kernel per width serves every tile.
template <int NV>
KX_AVX512_PREFETCHW void tile_kernel(const Tile& t) {
  constexpr int MR = kTileRows;
  // Columns beyond t.cols are masked off in the last vector; NV * 16 >= t.cols > (NV - 1) * 16.
  const int tail = t.cols - (NV - 1) * 16;
  const __mmask16 last = static_cast<__mmask16>(tail >= 16 ? 0xFFFF : (1u << tail) - 1u);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

  const float* rows[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) rows[r] = t.A + std::min(r, t.rows - 1) * t.rsa;
  const int64_t K = t.K, ldb = t.ldb, csa = t.csa, rsa = t.rsa;
  // A read transposed (rsa 1) walks a column of A and B's rows a stride apart, which the hardware
  // prefetcher loses at page boundaries: ask for those kPrefetchRows ahead. Rows of A read along
  // (csa 1) are short streams the prefetcher finds too late: ask for those of the tiles two row
  // blocks on, and for their lines of C, which are about to be written.
  const bool transposed = csa != 1;
  constexpr int64_t kAhead = 2 * MR;
  if (!transposed) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) __builtin_prefetch(t.C + (r + kAhead) * t.ldc + 16 * v, 1);
  }
  const float* b = t.B;
  const auto step = [&](const float* const* a_rows, int64_t ka) KX_AVX512 {
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bv[v] = (v == NV - 1) ? _mm512_maskz_loadu_ps(last, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a_rows[r][ka]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  };
  const auto prefetch_ahead = [&](const float* a) KX_AVX512 {
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchRows * csa), _MM_HINT_T0);
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchRows * ldb + 16 * v), _MM_HINT_T0);
  };
  if (!transposed) {
    for (int64_t k = 0; k < K; ++k, b += ldb) {
      if ((k & 15) == 0) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + kAhead * rsa + k), _MM_HINT_T0);
      }
      step(rows, k);
    }
  } else if (t.rows == MR && rsa == 1) {  // a whole tile's rows of a k side by side: one pointer
    for (const float* a = t.A; b != t.B + K * ldb; a += csa, b += ldb) {
      prefetch_ahead(a);
      const float* a_rows[MR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) a_rows[r] = a + r;
      step(a_rows, 0);
    }
  } else {
    for (int64_t ka = 0; ka < K * csa; ka += csa, b += ldb) {
      prefetch_ahead(rows[0] + ka);
      step(rows, ka);
    }
  }

  __m512 bias[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v)
    bias[v] = t.bias ? _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xFFFF, t.bias + 16 * v) : _mm512_setzero_ps();
  const TileStore store{t.beta, t.relu, t.rounding};
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (r == t.rows) break;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) store(t.C + r * t.ldc + 16 * v, v == NV - 1 ? last : 0xFFFF, acc[r][v], bias[v]);
  }
}

KX_AVX512_PREFETCHW void tile_any(const Tile& t) {
  if (t.cols > 32) return tile_kernel<3>(t);
  if (t.cols > 16) return tile_kernel<2>(t);
  tile_kernel<1>(t);
}

// C's values of a dot-product tile from their sums [rows, cols]: beta, bias, ReLU, rounding. One loop
// for every tile shape, out of line: unrolled into each of the sixteen kernels it cost libkx kilobytes.
[[gnu::noinline]] void store_dot_tile(const DotTile& t, const float* sums, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float* c = t.C + r * t.ldc;
    for (int j = 0; j < cols; ++j) {
      float v = sums[r * cols + j];
      if (t.beta != 0.0f) v += t.beta * c[j];
      if (t.bias) v += t.bias[j];
      if (t.relu && v < 0.0f) v = 0.0f;
      c[j] = round_value(v, t.rounding);
    }
  }
}

// Dot-product tile for C = A B^T: 16 k-lanes per accumulator, reduced once at the end.
template <int MR, int NR>
KX_AVX512 void dot_kernel(const DotTile& t) {
  __m512 acc[MR][NR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_setzero_ps();
  int64_t k = 0;
  auto step = [&](int64_t k0, __mmask16 m) KX_AVX512 {
    __m512 a[MR], b[NR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) a[r] = _mm512_maskz_loadu_ps(m, t.A + r * t.lda + k0);
#pragma GCC unroll 4
    for (int c = 0; c < NR; ++c) b[c] = _mm512_maskz_loadu_ps(m, t.B + c * t.ldb + k0);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < NR; ++c) acc[r][c] = _mm512_fmadd_ps(a[r], b[c], acc[r][c]);
  };
  for (; k + 16 <= t.K; k += 16) step(k, 0xFFFF);
  if (k < t.K) step(k, static_cast<__mmask16>((1u << (t.K - k)) - 1u));
  float sums[MR * NR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) sums[r * NR + j] = _mm512_reduce_add_ps(acc[r][j]);
  store_dot_tile(t, sums, MR, NR);
}

template <int MR>
KX_AVX512 void dot_rows(const DotTile& t) {
  switch (t.cols) {
    case 4: return dot_kernel<MR, 4>(t);
    case 3: return dot_kernel<MR, 3>(t);
    case 2: return dot_kernel<MR, 2>(t);
    default: return dot_kernel<MR, 1>(t);
  }
}

KX_AVX512 void dot_any(const DotTile& t) {
  switch (t.rows) {
    case 4: return dot_rows<4>(t);
    case 3: return dot_rows<3>(t);
    case 2: return dot_rows<2>(t);
    default: return dot_rows<1>(t);
  }
}

}  // namespace

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
}

DotKernel dot_avx512() { return cpu_has_avx512() ? &dot_any : nullptr; }

TileKernel tile_avx512() {
  return cpu_has_avx512() ? &tile_any : nullptr;
}

}  // namespace kx::backend::cpu

#pragma GCC diagnostic pop

#else

namespace kx::backend::cpu {
bool cpu_has_avx512() { return false; }
TileKernel tile_avx512() { return nullptr; }
DotKernel dot_avx512() { return nullptr; }
}  // namespace kx::backend::cpu

#endif
