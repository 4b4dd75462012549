// What cuBLASLt leaves to kx around a GEMM: the product of an empty sum (K = 0).
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"

namespace kx::backend::cuda {
namespace {

// As the CPU's tile kernels store an empty sum: 0 + beta * c, each operation rounded.
__global__ void scale_rows_kernel(int64_t rows, int64_t cols, int64_t ld, float factor, float* x) {
  KX_GRID_STRIDE(i, rows * cols) {
    float* p = x + (i / cols) * ld + i % cols;
    *p = __fadd_rn(0.0f, __fmul_rn(factor, *p));
  }
}

}  // namespace

void scale_rows(cudaStream_t s, int64_t rows, int64_t cols, int64_t ld, float factor, float* x) {
  if (rows * cols > 0) scale_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(rows, cols, ld, factor, x);
}

}  // namespace kx::backend::cuda
