// bfloat16 GEMM on AArch64 CPUs with FEAT_BF16 (the kernel's HWCAP2_BF16): BFDOT, two bfloat16
// products added to each float32 lane. As on x86 (gemm_bf16_avx512.cpp) the operands are packed as
// pairs along k, one 32-bit word holding the bfloat16 values of k = 2p (low half) and 2p + 1, and the
// blocked driver runs the kernel like the float32 one, a "k" being a pair. A is packed with the rows of
// a pair side by side, so one load brings four rows' pairs and the by-element BFDOT takes each as a lane.
//
// BFDOT rather than BFMMLA: BFDOT keeps the driver's row x column tiles and x86's packing; BFMMLA
// multiplies 2 x 4 by 4 x 2 blocks, which needs other packings and 2-row tiles, for a gain that depends
// on the core. Only the functions marked KX_BF16 use the bf16 instructions: the rest of the file (the
// packing, the CPU check) stays baseline armv8-a, and the kernel runs only where the CPU reports BF16.
#include "backend/cpu/gemm_bf16.hpp"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <omp.h>
#include <sys/auxv.h>

#include <algorithm>
#include <utility>

#include "backend/rounding_math.hpp"

#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)  // Linux's arch/arm64 uapi hwcap.h; older C libraries lack the name
#endif

// GCC 12's arm_neon.h defines the bf16 intrinsics for "arch=armv8.2-a+bf16"; "+bf16" alone does not
// let them inline.
#define KX_BF16 __attribute__((target("arch=armv8.2-a+bf16")))

namespace kx::backend::cpu {
namespace {

constexpr int kLanes = 4;                  // float32 lanes in a NEON vector (bfloat16 pairs in one)
constexpr int64_t kParallelPack = 1 << 15;  // words; below, one thread packs

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Two values as one word of two bfloat16 (each rounded to nearest even): `even` in the low half.
inline float pair(float even, float odd) {
  return bits_float((float_bits(round_bfloat16(even)) >> 16) | (float_bits(round_bfloat16(odd)) & 0xFFFF0000u));
}

// dst[p * padded + i] = pair(X(i, 2p), X(i, 2p + 1)) for p < ceil(k / 2), i < padded, where
// X(i, k) = src[i * rs + k * cs]; rows from `rows` to `padded` and a missing last k read as zero.
void pack_pairs(int64_t rows, int64_t padded, int64_t k, const float* src, int64_t rs, int64_t cs, float* dst,
                int threads) {
  const int64_t pairs = (k + 1) / 2;
#pragma omp parallel for num_threads(threads) schedule(static) if (pairs * padded >= kParallelPack)
  for (int64_t p = 0; p < pairs; ++p) {
    const float* even = src + 2 * p * cs;
    float* out = dst + p * padded;
    if (2 * p + 1 < k)
      for (int64_t i = 0; i < rows; ++i) out[i] = pair(even[i * rs], even[i * rs + cs]);
    else
      for (int64_t i = 0; i < rows; ++i) out[i] = pair(even[i * rs], 0.0f);
    std::fill(out + rows, out + padded, 0.0f);
  }
}

// The first n (1 to 4) floats at p; the others zero.
inline float32x4_t load_lanes(const float* p, int n) {
  if (n >= kLanes) return vld1q_f32(p);
  float part[kLanes] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::copy(p, p + n, part);
  return vld1q_f32(part);
}

inline void store_lanes(float* p, int n, float32x4_t x) {
  if (n >= kLanes) return vst1q_f32(p, x);
  float part[kLanes];
  vst1q_f32(part, x);
  std::copy(part, part + n, p);
}

// Stores rows x vectors accumulators (acc[r * vectors + v]) at the tile's column `col`, the last vector
// possibly partial. As the float32 kernels: (sum + bias), then + beta * C fused, then ReLU, then the
// rounding. One function for every chunk shape: the kernels' templates stay small.
void store_chunk(const Tile& t, int col, int rows, int vectors, const float32x4_t* acc) {
  const int cols = t.cols - col;
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < vectors; ++v) {
      float* c = t.C + r * t.ldc + col + kLanes * v;
      const int n = std::min(kLanes, cols - kLanes * v);
      float32x4_t x = acc[r * vectors + v];
      if (t.bias) x = vaddq_f32(x, load_lanes(t.bias + col + kLanes * v, n));
      if (t.beta != 0.0f) x = vfmaq_n_f32(x, load_lanes(c, n), t.beta);
      if (t.relu) x = vmaxq_f32(x, vdupq_n_f32(0.0f));
      store_lanes(c, n, x);
      if (t.rounding != Rounding::None)  // a mixed-precision layer's output is stored as a 16-bit value
        for (int l = 0; l < n; ++l) c[l] = round_value(c[l], t.rounding);
    }
}

// One pair of k for rows R...: row r's pair is lane r % 4 of a_lo (rows 0-3) or a_hi (rows 4-7).
template <int MR, int NV, int... R>
KX_BF16 inline void dot_rows(float32x4_t (&acc)[MR][NV], const bfloat16x8_t (&bv)[NV], bfloat16x8_t a_lo,
                             bfloat16x8_t a_hi, std::integer_sequence<int, R...>) {
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) ((acc[R][v] = vbfdotq_laneq_f32(acc[R][v], bv[v], R < 4 ? a_lo : a_hi, R % 4)), ...);
}

// C[MR rows, up to NV * 4 columns] of the tile from its column `col`; the last vector may be partial.
// Reads whole vectors of A and B: the packing pads rows of A to a tile's 8 and columns of B to a vector.
template <int MR, int NV>
KX_BF16 void chunk_kernel(const Tile& t, int col) {
  // Every loop over rows and vectors unrolled, so that the accumulators stay in registers.
  float32x4_t acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = vdupq_n_f32(0.0f);
  const float* a = t.A;
  const float* b = t.B + col;
  for (int64_t k = 0; k < t.K; ++k, a += t.csa, b += t.ldb) {
    bfloat16x8_t bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = vreinterpretq_bf16_f32(vld1q_f32(b + kLanes * v));
    const bfloat16x8_t a_lo = vreinterpretq_bf16_f32(vld1q_f32(a));
    const bfloat16x8_t a_hi = MR > 4 ? vreinterpretq_bf16_f32(vld1q_f32(a + kLanes)) : a_lo;
    dot_rows(acc, bv, a_lo, a_hi, std::make_integer_sequence<int, MR>{});
  }

  store_chunk(t, col, MR, NV, &acc[0][0]);
}

// Column chunks of 3 vectors (8 rows: 24 accumulators, 3 of B, 2 of A's pairs in NEON's 32 registers).
template <int MR>
KX_BF16 void bf16_rows(const Tile& t) {
  int col = 0, vectors = (t.cols + kLanes - 1) / kLanes;
  for (; vectors >= 3; vectors -= 3, col += 3 * kLanes) chunk_kernel<MR, 3>(t, col);
  if (vectors == 2)
    chunk_kernel<MR, 2>(t, col);
  else if (vectors == 1)
    chunk_kernel<MR, 1>(t, col);
}

KX_BF16 void bf16_any(const Tile& t) {
  switch (t.rows) {
    case 8: return bf16_rows<8>(t);
    case 7: return bf16_rows<7>(t);
    case 6: return bf16_rows<6>(t);
    case 5: return bf16_rows<5>(t);
    case 4: return bf16_rows<4>(t);
    case 3: return bf16_rows<3>(t);
    case 2: return bf16_rows<2>(t);
    default: return bf16_rows<1>(t);
  }
}

}  // namespace

bool cpu_has_bf16_dot() { return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0; }

const char* bf16_dot_feature() { return "FEAT_BF16 (BFDOT)"; }

bool bf16_dot_outruns_fma() {
  // Not timed: no Arm CPU with BF16 was at hand (emulated timings say nothing). Auto takes BFDOT where
  // the CPU has it: one BFDOT adds eight products to four lanes where an FMLA adds four, and its
  // packed operands are half the bytes. On x86 the same argument failed on Intel's Xeons (vdpbf16ps at
  // half the FMA rate, measured), so where a core proves slower, this is the line to change;
  // CpuBf16Gemm::Fma forces the float32 FMAs meanwhile.
  return cpu_has_bf16_dot();
}

void bf16_gemm(const Bf16Gemm& g, FloatBuffer& packed_a, FloatBuffer& packed_b, FloatBuffer&, FloatBuffer& workspace,
               int threads) {
  const int64_t pairs = (g.K + 1) / 2;
  const int64_t rows = round_up(g.M, kTileRows), cols = round_up(g.N, kLanes);
  if (packed_a.size() < static_cast<size_t>(pairs * rows)) packed_a.resize(static_cast<size_t>(pairs * rows));
  if (packed_b.size() < static_cast<size_t>(pairs * cols)) packed_b.resize(static_cast<size_t>(pairs * cols));
  // A(i, k) and B(k, j) as the transpositions say; both packed with i (or j) contiguous within a pair.
  const bool ta = g.ta == Trans::Yes, tb = g.tb == Trans::Yes;
  pack_pairs(g.M, rows, g.K, g.A, ta ? 1 : g.lda, ta ? g.lda : 1, packed_a.data(), threads);
  pack_pairs(g.N, cols, g.K, g.B, tb ? g.ldb : 1, tb ? 1 : g.ldb, packed_b.data(), threads);
  blocked_gemm({g.M, g.N, pairs, packed_a.data(), 1, rows, packed_b.data(), cols, g.beta, g.C, g.ldc, g.bias, g.relu,
                g.rounding},
               &bf16_any, threads, workspace);
}

}  // namespace kx::backend::cpu

#endif
