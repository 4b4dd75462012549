// Attention's element-wise step: the causal mask Keras adds before the softmax.
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"

namespace kx::backend::cuda {
namespace {

__global__ void causal_mask_add_kernel(int64_t n, int64_t rows, int64_t cols, float value, float* scores) {
  KX_GRID_STRIDE(k, n) {
    const int64_t j = k % cols, i = (k / cols) % rows;
    if (j > i) scores[k] = __fadd_rn(scores[k], value);
  }
}

}  // namespace

void causal_mask_add(cudaStream_t s, int64_t count, int64_t rows, int64_t cols, float value, float* scores) {
  const int64_t n = count * rows * cols;
  if (n > 0) causal_mask_add_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, rows, cols, value, scores);
}

}  // namespace kx::backend::cuda
