#include "backend/cuda/lt_gemm.hpp"

#include <climits>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/kernels.cuh"

namespace kx::backend::cuda {
namespace {

// The largest power of two (up to 256) dividing the address: cuBLASLt picks kernels by alignment.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int k = 4;
  while (k < 256 && a % (2 * k) == 0) k *= 2;
  return k;
}

cublasOperation_t op(Trans t) { return t == Trans::Yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

LtGemm::LtGemm(void* workspace, size_t workspace_bytes, double* column_scratch)
    : workspace_(workspace), workspace_bytes_(workspace_bytes), column_scratch_(column_scratch) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cublasLtDestroy(handle_);
}

LtGemm::Plan& LtGemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  // Built in a guard so that a failure half-way frees what was made.
  struct Guard {
    Plan& p;
    bool keep = false;
    ~Guard() {
      if (keep) return;
      if (p.a) cublasLtMatrixLayoutDestroy(p.a);
      if (p.b) cublasLtMatrixLayoutDestroy(p.b);
      if (p.c) cublasLtMatrixLayoutDestroy(p.c);
      if (p.op) cublasLtMatmulDescDestroy(p.op);
    }
  } guard{p};
  const cublasComputeType_t compute = key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Column-major: D^T[N, M] = op(B)^T op(A)^T, so cuBLASLt's A is our B and its B our A.
  const cublasOperation_t op_a = op(key.tb), op_b = op(key.ta);
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "TRANSB");
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &key.epilogue, sizeof key.epilogue),
        "EPILOGUE");
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // Our B as stored: [K, N] (ldb) read column-major is [N, K]; transposed it is stored [N, K] -> [K, N].
  const bool b_plain = key.tb == Trans::No, a_plain = key.ta == Trans::No;
  check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, u(b_plain ? key.N : key.K), u(b_plain ? key.K : key.N), key.ldb),
        "layout of B");
  check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, u(a_plain ? key.K : key.M), u(a_plain ? key.M : key.K), key.lda),
        "layout of A");
  check(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, u(key.N), u(key.M), key.ldc), "layout of C");

  if (key.batch > 1) {
    const int32_t count = static_cast<int32_t>(key.batch);
    // cuBLASLt's A is our B and its B our A (above).
    const std::pair<cublasLtMatrixLayout_t, int64_t> strided[] = {{p.a, key.stride_b}, {p.b, key.stride_a},
                                                                   {p.c, key.stride_c}};
    for (const auto& layout_stride : strided) {
      check(cublasLtMatrixLayoutSetAttribute(layout_stride.first, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                             sizeof count),
            "BATCH_COUNT");
      check(cublasLtMatrixLayoutSetAttribute(layout_stride.first, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &layout_stride.second, sizeof layout_stride.second),
            "STRIDED_BATCH_OFFSET");
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = workspace_bytes_;
  const auto align_a = static_cast<uint32_t>(key.align_a), align_b = static_cast<uint32_t>(key.align_b),
             align_c = static_cast<uint32_t>(key.align_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_b, sizeof align_b);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a, sizeof align_a);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) check(st, "cublasLtMatmulAlgoGetHeuristic");
  p.usable = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (p.usable) p.algo = result.algo;
  guard.keep = true;
  return plans_.emplace(key, p).first->second;
}

bool LtGemm::matmul(cudaStream_t stream, const Key& key, const float* A, const float* B, float beta, float* C,
                    const void* epilogue_pointer) {
  Plan& p = plan(key);
  if (!p.usable) return false;
  if (epilogue_pointer)
    check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epilogue_pointer,
                                                sizeof epilogue_pointer),
          "BIAS_POINTER");
  const float alpha = 1.0f;
  const cublasStatus_t st = cublasLtMatmul(handle_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo,
                                           workspace_, workspace_bytes_, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED && key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    p.usable = false;  // the fused form is refused: the caller falls back, now and from now on
    return false;
  }
  check(st, "cublasLtMatmul");
  return true;
}

void LtGemm::run(cudaStream_t stream, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep) {
  if (ep.rounding != Rounding::None) {
    // 16-bit operands: bfloat16 and float16 values are exact in TF32, so TF32 tensor cores compute
    // their products exactly and sum them in float32, as a 16-bit GEMM with float32 accumulation
    // does; then what was stored is rounded.
    Epilogue plain = ep;
    plain.rounding = Rounding::None;
    {
      // TF32 for this product only, also when it throws: a later strict float32 GEMM stays strict.
      struct Restore {
        bool& flag;
        bool old;
        ~Restore() { flag = old; }
      } restore{tf32_, std::exchange(tf32_, true)};
      run(stream, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, plain);
    }
    if (!ep.keep_float32) round_rows(stream, ep.rounding, M, N, ldc, C);
    if (ep.bias_grad) round_to(stream, ep.rounding, N, ep.bias_grad, ep.bias_grad);
    check(cudaGetLastError(), "rounding a GEMM's result");
    return;
  }
  if (ep.bias_grad) {
    if (tb != Trans::No || ldb != N || ep.bias || ep.activation != Activation::None)
      fail(Status::Internal, "a bias gradient beside a GEMM needs B untransposed and dense, and no other epilogue");
    // cuBLASLt's A is our B (see above): its BGRADA sums op(B) over k into a vector of N, written
    // through the bias pointer, which it reads in 16-byte vectors.
    const bool fused = M > 0 && N > 0 && K > 0 && alignment(ep.bias_grad) >= 16 &&
                       matmul(stream,
                              Key{ta, tb, M, N, K, lda, ldb, ldc, CUBLASLT_EPILOGUE_BGRADA, tf32_, beta != 0.0f,
                                  alignment(A), alignment(B), alignment(C), 1, 0, 0, 0},
                              A, B, beta, C, ep.bias_grad);
    if (fused) {
      check(cudaGetLastError(), "GEMM with the bias gradient");
      return;
    }
    bias_grad(stream, K, N, B, ep.bias_grad, column_scratch_);
    run(stream, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, Epilogue{});
    return;
  }
  if (M <= 0 || N <= 0) return;
  const bool relu = ep.activation == Activation::Relu;
  if (K <= 0) {  // an empty sum: beta C and the epilogue in one kernel, as the CPU computes them
    empty_sum_gemm(stream, M, N, ldc, beta, ep.bias, relu, C);
    check(cudaGetLastError(), "GEMM of an empty sum");
    return;
  }
  // cuBLASLt reads the bias in 16-byte vectors; a bias that is not aligned so is added afterwards.
  const bool fuse_bias = ep.bias && alignment(ep.bias) >= 16;
  bool fuse = fuse_bias || !ep.bias;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (fuse) epilogue = fuse_bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                 : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  auto key = [&](cublasLtEpilogue_t e) {
    return Key{ta, tb, M, N, K, lda, ldb, ldc, e, tf32_, beta != 0.0f, alignment(A), alignment(B), alignment(C), 1, 0, 0, 0};
  };
  if (!matmul(stream, key(epilogue), A, B, beta, C, fuse_bias ? ep.bias : nullptr)) {
    // No fused form: the plain product, then the epilogue as a kernel of its own.
    if (epilogue == CUBLASLT_EPILOGUE_DEFAULT || !matmul(stream, key(CUBLASLT_EPILOGUE_DEFAULT), A, B, beta, C, nullptr))
      fail(Status::Unsupported, "cuBLASLt has no algorithm for a " + std::to_string(M) + "x" + std::to_string(N) +
                                    "x" + std::to_string(K) + " GEMM");
    fuse = false;
  }
  if (!fuse && (ep.bias || relu)) bias_relu(stream, M, N, ldc, C, ep.bias, relu);
  check(cudaGetLastError(), "GEMM epilogue");
}

void LtGemm::run_batched(cudaStream_t stream, const BatchedGemm& g, const float* A, const float* B, float* C) {
  if (g.M <= 0 || g.N <= 0 || g.outer <= 0 || g.inner <= 0) return;
  if (g.K <= 0 || g.inner > INT32_MAX) {  // an empty sum, or more than cuBLASLt counts: GEMM by GEMM
    Epilogue ep;
    ep.rounding = g.rounding;
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i)
        run(stream, g.ta, g.tb, g.M, g.N, g.K, A + o * g.a_outer + i * g.a_inner, g.lda, B + o * g.b_outer + i * g.b_inner,
            g.ldb, g.beta, C + o * g.c_outer + i * g.c_inner, g.ldc, ep);
    return;
  }
  // 16-bit operands are exact in TF32 (as in run); float32 follows the backend's setting.
  const bool tf32 = g.rounding != Rounding::None || tf32_;
  for (int64_t o = 0; o < g.outer; ++o) {
    const float* a = A + o * g.a_outer;
    const float* b = B + o * g.b_outer;
    float* c = C + o * g.c_outer;
    const Key key{g.ta, g.tb, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, CUBLASLT_EPILOGUE_DEFAULT, tf32, g.beta != 0.0f,
                  alignment(a), alignment(b), alignment(c), g.inner, g.a_inner, g.b_inner, g.c_inner};
    if (!matmul(stream, key, a, b, g.beta, c, nullptr))
      fail(Status::Unsupported, "cuBLASLt has no algorithm for a batch of " + std::to_string(g.inner) + " " +
                                    std::to_string(g.M) + "x" + std::to_string(g.N) + "x" + std::to_string(g.K) +
                                    " GEMMs");
    if (g.rounding != Rounding::None)
      for (int64_t i = 0; i < g.inner; ++i) round_rows(stream, g.rounding, g.M, g.N, g.ldc, c + i * g.c_inner);
  }
  check(cudaGetLastError(), "batched GEMM");
}

}  // namespace kx::backend::cuda
