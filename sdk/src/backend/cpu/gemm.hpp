// CPU GEMM: a blocked, OpenMP-parallel driver over register-tile kernels, and CBLAS when built with it.
#pragma once
#include <cstdint>

#include "backend/cpu/range_done.hpp"
#include "backend/backend.hpp"
#include "kx/tensor.hpp"

namespace kx::backend::cpu {

// One register tile: C[rows, cols] = A-block * B-panel over the full K, rows <= kTileRows and
// cols <= kTileCols. A(i, k) = A[i * rsa + k * csa]; B(k, j) = B[k * ldb + j] (rows of B contiguous).
struct Tile {
  int64_t K;
  const float* A;
  int64_t rsa, csa;
  const float* B;
  int64_t ldb;
  float* C;
  int64_t ldc;
  int rows, cols;
  float beta;
  const float* bias;  // offset to this tile's first column, or null
  bool relu;
  Rounding rounding;  // of C as it is stored
};

inline constexpr int kTileRows = 8;
inline constexpr int kTileCols = 48;

using TileKernel = void (*)(const Tile&);

// A tile of C = A * B^T with rows of both contiguous in k: C(i, j) = sum_k A[i * lda + k] * B[j * ldb + k].
// rows <= kDotRows, cols <= kDotCols.
struct DotTile {
  int64_t K;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float* C;
  int64_t ldc;
  int rows, cols;
  float beta;
  const float* bias;
  bool relu;
  Rounding rounding;
};
inline constexpr int kDotRows = 4;
inline constexpr int kDotCols = 4;
using DotKernel = void (*)(const DotTile&);
// Null when this build or this CPU has no AVX-512 (then B is transposed and the tile kernel used).
DotKernel dot_avx512();

// C[M, N] = act(A B + beta C + bias) with A(i, k) = A[i * rsa + k * csa] and rows of B contiguous.
struct GemmProblem {
  int64_t M, N, K;
  const float* A;
  int64_t rsa, csa;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
  const float* bias;  // N values, or null
  bool relu;
  Rounding rounding = Rounding::None;  // of C as it is stored
};
// Runs `p` on up to `threads` threads; `workspace` holds partial sums when K is split. The kernel
// decides what a "k" is: a float32 column of A, or (bfloat16 kernels) a pair of packed columns.
void blocked_gemm(const GemmProblem& p, TileKernel kernel, int threads, FloatBuffer& workspace);
// `p` cut into ranges of range_rows rows of C, each computed whole by one thread with blocked_gemm's
// sums; range_done(k) then runs on that thread while range k's rows of C are in its cache, and row 0
// is final before any does (write_by_ranges). False, and nothing done, for a product whose K
// blocked_gemm slices (few tiles, long K).
bool gemm_by_row_ranges(const GemmProblem& p, TileKernel kernel, int threads, int64_t range_rows,
                        RangeDone range_done);
// `p` on the calling thread, tile by tile in blocked_gemm's order and sums (never sliced over K): for
// many small products, each on a thread of its own.
void serial_gemm(const GemmProblem& p, TileKernel kernel);

void tile_portable(const Tile& t);
// Whether this CPU runs the functions built with KX_AVX512 (AVX-512 F, VL and DQ, and FMA); false off
// x86-64. Those functions are called only where it is true.
bool cpu_has_avx512();
// Null when this build or this CPU has no AVX-512.
TileKernel tile_avx512();
// Whether this CPU runs the functions built for AVX2 and FMA; false off x86-64.
bool cpu_has_avx2_fma();
// Null when this build or this CPU has no AVX2 and FMA.
TileKernel tile_avx2();
// Null when this build is not for AArch64 (where every CPU has NEON).
TileKernel tile_neon();

bool cblas_available();
// C = op(A) op(B) + beta C through CBLAS (no epilogue); only when cblas_available().
void cblas_gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float beta, float* C, int64_t ldc);
const char* cblas_core_name();

}  // namespace kx::backend::cpu
