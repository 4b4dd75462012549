// bfloat16 GEMM on AVX512_BF16: operands packed as pairs of bfloat16 along k (one 32-bit lane holds
// A(i, 2p) and A(i, 2p + 1), or B(2p, j) and B(2p + 1, j)), so that one vdpbf16ps adds two products
// per float32 accumulator lane. The blocked driver runs it like the float32 kernel, a "k" being a pair.
#include "backend/cpu/gemm_bf16.hpp"

#include <omp.h>

#include <algorithm>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no such warning, and warns about the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "backend/cpu/avx512_common.hpp"

#define KX_AVX512_BF16 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma")))

namespace kx::backend::cpu {
namespace {

constexpr int64_t kParallelPack = 1 << 15;  // values; below, one thread packs

// 16 floats as 16 bfloat16 (round to nearest even), in the low half of each 32-bit lane.
KX_AVX512_BF16 inline __m512i bf16_low(const float* p, __mmask16 m) {
  return _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, p))));
}

KX_AVX512_BF16 inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// Row pair p of pack_row_pairs below. The loop bodies of the OpenMP regions are functions of their own:
// clang outlines a region without its function's target attribute, so no vector type may appear in it.
KX_AVX512_BF16 void pack_row_pair(int64_t p, int64_t k, int64_t cols, const float* src, int64_t ld, float* dst) {
  const float* even = src + 2 * p * ld;
  const float* odd = 2 * p + 1 < k ? even + ld : nullptr;
  float* out = dst + p * cols;
  for (int64_t j = 0; j < cols; j += 16) {
    const __mmask16 m = lanes(cols - j);
    __m512i v = bf16_low(even + j, m);
    if (odd) v = _mm512_or_si512(v, _mm512_slli_epi32(bf16_low(odd + j, m), 16));
    _mm512_mask_storeu_epi32(out + j, m, v);
  }
}

// dst[p * cols + j] = pair(src[2p * ld + j], src[(2p + 1) * ld + j]) for p < ceil(k / 2), j < cols; a
// missing last row reads as zero.
KX_AVX512_BF16 void pack_row_pairs(int64_t k, int64_t cols, const float* src, int64_t ld, float* dst, int threads) {
  const int64_t pairs = (k + 1) / 2;
#pragma omp parallel for num_threads(threads) schedule(static) if (pairs * cols * 2 >= kParallelPack)
  for (int64_t p = 0; p < pairs; ++p) pack_row_pair(p, k, cols, src, ld, dst);
}

// Row r of pack_rows below.
KX_AVX512_BF16 void pack_row(int64_t r, int64_t k, const float* src, int64_t ld, float* dst) {
  const int64_t pairs = (k + 1) / 2;
  const float* in = src + r * ld;
  char* out = reinterpret_cast<char*>(dst + r * pairs);
  int64_t i = 0;
  for (; i < k; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes(k - i), in + i));
    _mm256_mask_storeu_epi16(out + 2 * i, static_cast<__mmask16>(lanes(k - i)), reinterpret_cast<const __m256i&>(h));
  }
  if (k % 2) _mm_mask_storeu_epi16(out + 2 * k, 1, _mm_setzero_si128());
}

// dst[r * pairs + p] = pair(src[r * ld + 2p], src[r * ld + 2p + 1]): each row's values as bfloat16 in
// order (a missing last value reads as zero).
KX_AVX512_BF16 void pack_rows(int64_t rows, int64_t k, const float* src, int64_t ld, float* dst, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * k >= kParallelPack)
  for (int64_t r = 0; r < rows; ++r) pack_row(r, k, src, ld, dst);
}

// dst[p * cols + j] = pair(src[j * ld + 2p], src[j * ld + 2p + 1]): B transposed, packed for the kernel.
KX_AVX512_BF16 void pack_transposed(int64_t k, int64_t cols, const float* src, int64_t ld, float* dst,
                                    FloatBuffer& rows, int threads) {
  const int64_t pairs = (k + 1) / 2;
  if (rows.size() < static_cast<size_t>(cols * pairs)) rows.resize(static_cast<size_t>(cols * pairs));
  pack_rows(cols, k, src, ld, rows.data(), threads);
  // A transpose of 32-bit lanes, in 16 x 16 blocks through the caches.
  constexpr int64_t kB = 16;
#pragma omp parallel for num_threads(threads) schedule(static) if (pairs * cols >= kParallelPack)
  for (int64_t p0 = 0; p0 < pairs; p0 += kB)
    for (int64_t j0 = 0; j0 < cols; j0 += kB)
      for (int64_t p = p0; p < std::min(pairs, p0 + kB); ++p)
        for (int64_t j = j0; j < std::min(cols, j0 + kB); ++j) dst[p * cols + j] = rows[static_cast<size_t>(j * pairs + p)];
}

// One tile of kTileRows rows, NV vectors wide; a tile with fewer rows repeats its last row of A in the
// rest and stores only its own (as the float32 kernel).
template <int NV>
KX_AVX512_BF16 void bf16_kernel(const Tile& t) {
  constexpr int MR = kTileRows;
  const int tail = t.cols - (NV - 1) * 16;
  const __mmask16 last = lanes(tail);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  const float* rows[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) rows[r] = t.A + std::min(r, t.rows - 1) * t.rsa;
  const float* b = t.B;
  for (int64_t k = 0, ka = 0; k < t.K; ++k, ka += t.csa, b += t.ldb) {
    __m512bh bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bv[v] = reinterpret_cast<__m512bh>(v == NV - 1 ? _mm512_maskz_loadu_epi32(last, b + 16 * v)
                                                     : _mm512_loadu_si512(b + 16 * v));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      // The pair's bits broadcast as they are (a float load moves bits, it computes nothing).
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_ps(rows[r][ka]));
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
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

KX_AVX512_BF16 void bf16_any(const Tile& t) {
  if (t.cols > 32) return bf16_kernel<3>(t);
  if (t.cols > 16) return bf16_kernel<2>(t);
  bf16_kernel<1>(t);
}

}  // namespace

bool cpu_has_bf16_dot() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma");
}

const char* bf16_dot_feature() { return "AVX512_BF16"; }

bool bf16_dot_outruns_fma() {
  // Measured: Intel's Xeons without AMX (Sapphire / Emerald Rapids) issue one vdpbf16ps every two
  // cycles, half their float32 FMA rate; AMD's Zen 4 and Zen 5 issue it at their FMA rate, each with
  // twice the products.
  __builtin_cpu_init();
  return cpu_has_bf16_dot() && __builtin_cpu_is("amd");
}

void bf16_gemm(const Bf16Gemm& g, FloatBuffer& packed_a, FloatBuffer& packed_b, FloatBuffer& scratch,
               FloatBuffer& workspace, int threads) {
  const int64_t pairs = (g.K + 1) / 2;
  if (packed_a.size() < static_cast<size_t>(g.M * pairs)) packed_a.resize(static_cast<size_t>(g.M * pairs));
  if (packed_b.size() < static_cast<size_t>(pairs * g.N)) packed_b.resize(static_cast<size_t>(pairs * g.N));
  // A(i, k) as pairs along k: rows of A are contiguous in k unless A is transposed.
  int64_t rsa = pairs, csa = 1;
  if (g.ta == Trans::No) {
    pack_rows(g.M, g.K, g.A, g.lda, packed_a.data(), threads);
  } else {
    pack_row_pairs(g.K, g.M, g.A, g.lda, packed_a.data(), threads);
    rsa = 1;
    csa = g.M;
  }
  if (g.tb == Trans::No)
    pack_row_pairs(g.K, g.N, g.B, g.ldb, packed_b.data(), threads);
  else
    pack_transposed(g.K, g.N, g.B, g.ldb, packed_b.data(), scratch, threads);
  blocked_gemm({g.M, g.N, pairs, packed_a.data(), rsa, csa, packed_b.data(), g.N, g.beta, g.C, g.ldc, g.bias, g.relu,
                g.rounding},
               &bf16_any, threads, workspace);
}

}  // namespace kx::backend::cpu

#pragma GCC diagnostic pop

#elif !defined(__aarch64__)  // AArch64: gemm_bf16_neon.cpp

namespace kx::backend::cpu {
bool cpu_has_bf16_dot() { return false; }
const char* bf16_dot_feature() { return "AVX512_BF16 (x86-64) or FEAT_BF16 (AArch64)"; }
bool bf16_dot_outruns_fma() { return false; }
void bf16_gemm(const Bf16Gemm&, FloatBuffer&, FloatBuffer&, FloatBuffer&, FloatBuffer&, int) {
  fail(Status::Internal, "bfloat16 dot products on a CPU without them");
}
}  // namespace kx::backend::cpu

#endif
