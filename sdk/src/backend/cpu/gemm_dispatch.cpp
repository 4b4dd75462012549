#include "backend/activation_math.hpp"
#include "backend/cpu/gemm_dispatch.hpp"

#include <omp.h>

#include <algorithm>

#include "backend/cpu/gemm_bf16.hpp"
#include "kx/error.hpp"

namespace kx::backend::cpu {
namespace {

constexpr int64_t kParallelElements = 1 << 15;
constexpr int64_t kParallelFlops = 1 << 16;
// From this many rows of A on, C = A B^T transposes B and runs the register-tile kernel.
constexpr int64_t kDotMaxRows = 256;

// dst[cols, rows] = src[rows, cols]^T on the calling thread, in 32x32 blocks to stay in cache.
void transpose_into(int64_t rows, int64_t cols, const float* src, int64_t ld, float* dst) {
  constexpr int64_t kB = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kB)
    for (int64_t j0 = 0; j0 < cols; j0 += kB) {
      const int64_t i1 = std::min(rows, i0 + kB), j1 = std::min(cols, j0 + kB);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * ld + j];
    }
}

}  // namespace

GemmDispatch::GemmDispatch(int threads, CpuGemm choice, CpuBf16Gemm bf16) : threads_(threads) {
  if (choice == CpuGemm::Blas) {
    require(cblas_available(), Status::Unsupported, "this build of kx has no CBLAS");
    use_blas_ = true;
  } else if (choice == CpuGemm::Auto) {
    // The built-in AVX-512 and AVX2 kernels beat OpenBLAS on kx's step shapes (and let the layers
    // fuse their epilogues into the products); elsewhere prefer a tuned BLAS.
    tile_ = tile_avx512();
    if (!tile_) tile_ = tile_avx2();
    use_blas_ = !tile_ && cblas_available();
  }
  if (!tile_) tile_ = tile_avx512();
  if (tile_) dot_ = dot_avx512();
  if (!tile_) tile_ = tile_avx2();
  if (!tile_) tile_ = tile_neon();
  if (!tile_) tile_ = &tile_portable;
  if (bf16 == CpuBf16Gemm::Dot)
    require(cpu_has_bf16_dot(), Status::Unsupported,
            std::string("bfloat16 dot products need a CPU with ") + bf16_dot_feature() +
                ", which this one lacks (CpuBf16Gemm::Fma works on any)");
  bf16_dot_ = bf16 == CpuBf16Gemm::Dot || (bf16 == CpuBf16Gemm::Auto && bf16_dot_outruns_fma());
}

std::string GemmDispatch::kernel_name() const {
  std::string name = use_blas_ ? std::string("cblas (") + cblas_core_name() + ")"
                               : tile_ == &tile_portable ? "builtin portable"
                               : tile_ == tile_neon()    ? "builtin neon"
                               : tile_ == tile_avx2()    ? "builtin avx2"
                                                         : "builtin avx512";
  return name + (bf16_dot_ ? " + bf16 dot" : " + bf16 fma");
}

void GemmDispatch::run(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep) {
  if (M <= 0 || N <= 0) return;
  const bool relu = ep.activation == Activation::Relu;
  const Rounding store = ep.keep_float32 ? Rounding::None : ep.rounding;  // of C
  if (ep.rounding == Rounding::BFloat16 && bf16_dot_)
    return bf16_gemm({ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, ep.bias, relu, store}, packed_a_, packed_b_,
                     pack_scratch_, workspace_, threads_);
  // Otherwise 16-bit operands hold float32 values whose products are exact: the float32 kernels
  // compute them, and C is rounded as it is stored.
  if (use_blas_) {
    cblas_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    if (ep.bias || relu || store != Rounding::None) apply_epilogue(M, N, C, ldc, ep.bias, relu, store);
    return;
  }
  // The dot-product kernel saves transposing B, which pays off only for few rows of A (a batch of
  // Dense inputs); short dot products (K < 32) waste most of each reduction either way.
  if (tb == Trans::Yes && ta == Trans::No && dot_ && K >= 32 && M < kDotMaxRows)
    return gemm_dot(M, N, K, A, lda, B, ldb, beta, C, ldc, ep.bias, relu, store);
  if (tb == Trans::Yes) {  // the tile kernel needs rows of B contiguous: transpose B once
    if (transposed_.size() < static_cast<size_t>(K * N)) transposed_.resize(static_cast<size_t>(K * N));
    transpose(N, K, B, ldb, transposed_.data());
    B = transposed_.data();
    ldb = N;
  }
  const int64_t rsa = ta == Trans::No ? lda : 1;
  const int64_t csa = ta == Trans::No ? 1 : lda;
  blocked_gemm({M, N, K, A, rsa, csa, B, ldb, beta, C, ldc, ep.bias, relu, store}, tile_, threads_, workspace_);
}

bool GemmDispatch::run_by_row_ranges(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                                     int64_t ldb, float* C, int64_t ldc, const Epilogue& ep, int64_t range_rows,
                                     RangeDone range_done) {
  if (use_blas_ || ep.rounding != Rounding::None || ep.bias_grad) return false;
  const bool relu = ep.activation == Activation::Relu;
  return gemm_by_row_ranges({M, N, K, A, lda, 1, B, ldb, 0.0f, C, ldc, ep.bias, relu, Rounding::None}, tile_, threads_,
                            range_rows, range_done);
}

void GemmDispatch::run_batched(const BatchedGemm& g, const float* A, const float* B, float* C) {
  if (g.M <= 0 || g.N <= 0 || g.outer <= 0 || g.inner <= 0) return;
  Epilogue ep;
  ep.rounding = g.rounding;
  if (use_blas_ || (g.rounding == Rounding::BFloat16 && bf16_dot_)) {  // their own kernels, one product at a time
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i)
        run(g.ta, g.tb, g.M, g.N, g.K, A + o * g.a_outer + i * g.a_inner, g.lda, B + o * g.b_outer + i * g.b_inner,
            g.ldb, g.beta, C + o * g.c_outer + i * g.c_inner, g.ldc, ep);
    return;
  }
  // Work units: a product's rows in chunks of whole tiles, so that a few long products still share
  // out; each tile is computed whole by one thread, in the same order whoever runs it.
  constexpr int64_t kChunkRows = 8 * kTileRows;
  const int64_t items = g.outer * g.inner, chunks = (g.M + kChunkRows - 1) / kChunkRows, units = items * chunks;
  const int nt = items * g.M * g.N * g.K >= kParallelFlops ? static_cast<int>(std::min<int64_t>(threads_, units)) : 1;
  const bool transpose_b = g.tb == Trans::Yes;
  if (thread_transposed_.size() < static_cast<size_t>(nt)) thread_transposed_.resize(static_cast<size_t>(nt));
  if (transpose_b)
    for (int t = 0; t < nt; ++t)
      if (thread_transposed_[t].size() < static_cast<size_t>(g.K * g.N))
        thread_transposed_[t].resize(static_cast<size_t>(g.K * g.N));
  const int64_t rsa = g.ta == Trans::No ? g.lda : 1, csa = g.ta == Trans::No ? 1 : g.lda;
  const TileKernel kernel = tile_;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int id = omp_get_thread_num(), n = omp_get_num_threads();
    float* own = transpose_b ? thread_transposed_[id].data() : nullptr;
    int64_t transposed_item = -1;
    for (int64_t u = units * id / n; u < units * (id + 1) / n; ++u) {
      const int64_t item = u / chunks, i0 = (u % chunks) * kChunkRows;
      const int64_t o = item / g.inner, i = item % g.inner;
      const float* b = B + o * g.b_outer + i * g.b_inner;
      int64_t ldb = g.ldb;
      if (transpose_b) {  // the tile kernel needs rows of B contiguous
        if (transposed_item != item) transpose_into(g.N, g.K, b, g.ldb, own);
        transposed_item = item;
        b = own;
        ldb = g.N;
      }
      const GemmProblem p{std::min(kChunkRows, g.M - i0), g.N, g.K,
                          A + o * g.a_outer + i * g.a_inner + i0 * rsa, rsa, csa,
                          b, ldb, g.beta,
                          C + o * g.c_outer + i * g.c_inner + i0 * g.ldc, g.ldc,
                          nullptr, false, g.rounding};
      serial_gemm(p, kernel);
    }
  }
}

// C = A B^T with the dot-product kernel: no transposed copy of B.
void GemmDispatch::gemm_dot(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float beta, float* C, int64_t ldc, const float* bias, bool relu, Rounding store) {
  const int64_t row_blocks = (M + kDotRows - 1) / kDotRows;
  const int64_t col_blocks = (N + kDotCols - 1) / kDotCols;
  const int64_t tiles = row_blocks * col_blocks;
  const int nt = M * N * K >= kParallelFlops ? static_cast<int>(std::min<int64_t>(threads_, tiles)) : 1;
  const DotKernel kernel = dot_;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t i0 = (t / col_blocks) * kDotRows, j0 = (t % col_blocks) * kDotCols;
    DotTile tile{K,
                 A + i0 * lda,
                 lda,
                 B + j0 * ldb,
                 ldb,
                 C + i0 * ldc + j0,
                 ldc,
                 static_cast<int>(std::min<int64_t>(kDotRows, M - i0)),
                 static_cast<int>(std::min<int64_t>(kDotCols, N - j0)),
                 beta,
                 bias ? bias + j0 : nullptr,
                 relu,
                 store};
    kernel(tile);
  }
}

void GemmDispatch::apply_epilogue(int64_t M, int64_t N, float* C, int64_t ldc, const float* bias, bool relu,
                                  Rounding r) {
#pragma omp parallel for num_threads(threads_) if (M * N >= kParallelElements)
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) {
      float v = c[j] + (bias ? bias[j] : 0.0f);
      c[j] = round_value(relu ? backend::relu(v) : v, r);
    }
  }
}

void GemmDispatch::transpose(int64_t rows, int64_t cols, const float* src, int64_t ld, float* dst) {
  // dst[cols, rows] = src[rows, cols]^T, in 32x32 blocks to stay in cache.
  constexpr int64_t kB = 32;
  const int64_t rb = (rows + kB - 1) / kB, cb = (cols + kB - 1) / kB;
#pragma omp parallel for num_threads(threads_) if (rows * cols >= kParallelElements)
  for (int64_t b = 0; b < rb * cb; ++b) {
    const int64_t i0 = (b / cb) * kB, j0 = (b % cb) * kB;
    const int64_t i1 = std::min(rows, i0 + kB), j1 = std::min(cols, j0 + kB);
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * ld + j];
  }
}

}  // namespace kx::backend::cpu
