// What cuBLASLt leaves to kx around a GEMM: the product of an empty sum (K = 0).
#include "backend/activation_math.hpp"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"

namespace kx::backend::cuda {
namespace {

// As the CPU's tile kernels store an empty sum: (0 + bias), then + beta * c fused, then ReLU; C is
// not read when beta is 0 (it may hold anything, NaN included).
__global__ void empty_sum_kernel(int64_t rows, int64_t cols, int64_t ld, float beta, const float* bias, bool relu,
                                 float* x) {
  KX_GRID_STRIDE(i, rows * cols) {
    const int64_t c = i % cols;
    float* p = x + (i / cols) * ld + c;
    float v = bias ? __fadd_rn(0.0f, bias[c]) : 0.0f;
    if (beta != 0.0f) v = __fmaf_rn(beta, *p, v);
    *p = relu ? backend::relu(v) : v;
  }
}

}  // namespace

void empty_sum_gemm(cudaStream_t s, int64_t rows, int64_t cols, int64_t ld, float beta, const float* bias, bool relu,
                    float* x) {
  if (rows * cols > 0)
    empty_sum_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(rows, cols, ld, beta, bias, relu, x);
}

}  // namespace kx::backend::cuda
