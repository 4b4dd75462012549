// Row-major GEMMs through cuBLASLt, with the bias and ReLU epilogues and the bias gradient fused. A row-major C = A B is
// the column-major C^T = B^T A^T, so A and B trade places. The descriptors and the algorithm of each
// shape are built once and kept: the step loop only looks them up.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/backend.hpp"

namespace kx::backend::cuda {

class LtGemm {
 public:
  // column_scratch: kColumnScratchDoubles for the bias gradient that cuBLASLt does not fuse.
  LtGemm(void* workspace, size_t workspace_bytes, double* column_scratch);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void set_tf32(bool on) { tf32_ = on; }
  bool tf32() const { return tf32_; }

  // As Backend::gemm; the epilogue is fused where cuBLASLt can (else a separate kernel follows).
  void run(cudaStream_t stream, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep);
  // As Backend::gemm_batched: one strided-batched cuBLASLt call per outer index (the inner GEMMs
  // are evenly strided; the outer stride need not be a multiple of the inner).
  void run_batched(cudaStream_t stream, const BatchedGemm& g, const float* A, const float* B, float* C);

 private:
  // Everything the algorithm choice depends on, pointers' alignment included.
  struct Key {
    Trans ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    cublasLtEpilogue_t epilogue;
    bool tf32, accumulate;  // accumulate: beta != 0
    int align_a, align_b, align_c;
    // A strided batch (batch 1: a single GEMM); strides of A, B and C between the batch's matrices.
    int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
    auto tie() const {
      return std::tie(ta, tb, M, N, K, lda, ldb, ldc, epilogue, tf32, accumulate, align_a, align_b, align_c, batch,
                      stride_a, stride_b, stride_c);
    }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = true;  // false: cuBLASLt has no algorithm (or refused the one it offered)
  };
  // The plan of key, built on first use; not usable when cuBLASLt offers no algorithm for it.
  Plan& plan(const Key& key);
  // C = op(A) op(B) + beta C with the plan of key; false when cuBLASLt refuses the shape.
  bool matmul(cudaStream_t stream, const Key& key, const float* A, const float* B, float beta, float* C,
              const void* epilogue_pointer);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  double* column_scratch_;
  bool tf32_ = true;
  std::map<Key, Plan> plans_;
};

}  // namespace kx::backend::cuda
