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

}  // namespace

GemmDispatch::GemmDispatch(int threads, CpuGemm choice, CpuBf16Gemm bf16) : threads_(threads) {
  if (choice == CpuGemm::Blas) {
    require(cblas_available(), Status::Unsupported, "this build of kx has no CBLAS");
    use_blas_ = true;
  } else if (choice == CpuGemm::Auto) {
    // The built-in AVX-512 kernel beats OpenBLAS on kx's step shapes; else prefer a tuned BLAS.
    tile_ = tile_avx512();
    use_blas_ = !tile_ && cblas_available();
  }
  if (!tile_) tile_ = tile_avx512();
  if (tile_) dot_ = dot_avx512();
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
