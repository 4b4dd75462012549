// Which CPU kernel computes a GEMM, and the copies it needs: the built-in AVX-512 (or portable)
// register tiles through the blocked driver, the dot-product tiles for C = A B^T with few rows, CBLAS,
// and for bfloat16 products the CPU's bfloat16 dot products (AVX512_BF16, AArch64's BFDOT) or float32 FMAs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/range_done.hpp"
#include "kx/tensor.hpp"

namespace kx::backend::cpu {

class GemmDispatch {
 public:
  // Unsupported when `choice` or `bf16` names a kernel this build or CPU lacks.
  GemmDispatch(int threads, CpuGemm choice, CpuBf16Gemm bf16);
  // Backend::gemm but for the epilogue's bias gradient, which the backend computes beside it.
  void run(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep);
  // C = A B + bias (A and B untransposed, float32) cut into ranges of range_rows rows of C, as
  // gemm_by_row_ranges: range_done(k) runs while range k is in cache. False, and nothing done, where
  // this product goes another way (CBLAS, a sliced K): the caller then runs it with `run`.
  bool run_by_row_ranges(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                         float* C, int64_t ldc, const Epilogue& ep, int64_t range_rows,
                         RangeDone range_done);
  // Backend::gemm_batched: the products shared between the threads, each whole on one thread (small
  // products gain nothing from splitting), so every sum is the same whatever the thread count.
  void run_batched(const BatchedGemm& g, const float* A, const float* B, float* C);
  // "builtin avx512", "cblas (...)", "builtin portable"; with " + bf16 dot" or " + bf16 fma".
  std::string kernel_name() const;

 private:
  void gemm_dot(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                float* C, int64_t ldc, const float* bias, bool relu, Rounding store);
  void apply_epilogue(int64_t M, int64_t N, float* C, int64_t ldc, const float* bias, bool relu, Rounding r);
  void transpose(int64_t rows, int64_t cols, const float* src, int64_t ld, float* dst);

  int threads_;
  bool use_blas_ = false;
  bool bf16_dot_ = false;  // bfloat16 products through vdpbf16ps / BFDOT, else float32 FMAs
  TileKernel tile_ = nullptr;
  DotKernel dot_ = nullptr;
  FloatBuffer transposed_, workspace_, packed_a_, packed_b_, pack_scratch_;
  std::vector<FloatBuffer> thread_transposed_;  // run_batched's transposed B, one per thread
};

}  // namespace kx::backend::cpu
