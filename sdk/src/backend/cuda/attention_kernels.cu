// Attention's element-wise steps: the causal mask Keras adds before the softmax, and the masks it
// replaces scores by.
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

__global__ void attention_mask_fill_kernel(int64_t n, int64_t heads, int64_t tq, int64_t tv, const float* mask,
                                           int32_t causal, float value, float* scores) {
  KX_GRID_STRIDE(k, n) {
    const int64_t j = k % tv, i = (k / tv) % tq, r = k / (tv * tq * heads);
    const bool masked = (mask && mask[(r * tq + i) * tv + j] == 0.0f) || (causal && j > i);
    if (masked) scores[k] = value;
  }
}

}  // namespace

void attention_mask_fill(cudaStream_t s, int64_t rows, int64_t heads, int64_t tq, int64_t tv, const float* mask,
                         int32_t causal, float value, float* scores) {
  const int64_t n = rows * heads * tq * tv;
  if (n > 0) attention_mask_fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, heads, tq, tv, mask, causal, value, scores);
}

void causal_mask_add(cudaStream_t s, int64_t count, int64_t rows, int64_t cols, float value, float* scores) {
  const int64_t n = count * rows * cols;
  if (n > 0) causal_mask_add_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, rows, cols, value, scores);
}

}  // namespace kx::backend::cuda
