// Mixed precision's kernels: rounding to bfloat16 / float16 with the CPU's formula (rounding_math.hpp),
// the loss scale's multiplication, finiteness check and state update (loss_scale_math.hpp).
#include <cmath>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/loss_scale_math.hpp"
#include "backend/rounding_math.hpp"

namespace kx::backend::cuda {
namespace {

__global__ void round_kernel(Rounding r, int64_t n, const float* x, float* y) {
  KX_GRID_STRIDE(i, n) y[i] = round_value(x[i], r);
}

__global__ void round_rows_kernel(Rounding r, int64_t rows, int64_t cols, int64_t ld, float* x) {
  KX_GRID_STRIDE(i, rows * cols) {
    float* p = x + (i / cols) * ld + i % cols;
    *p = round_value(*p, r);
  }
}

__global__ void multiply_by_kernel(int64_t n, const float* factor, float* x) {
  const float f = *factor;
  KX_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], f);
}

// Threads that meet a value that is not finite clear the flag; they all write the same 0.
__global__ void loss_scale_check_kernel(int64_t n, const float* g, LossScaleState* s) {
  KX_GRID_STRIDE(i, n) if (!isfinite(g[i])) s->finite = 0.0f;
}

__global__ void loss_scale_update_kernel(LossScaleState* s) { update_loss_scale(*s); }

}  // namespace

void round_to(cudaStream_t s, Rounding r, int64_t n, const float* x, float* y) {
  if (n > 0) round_kernel<<<blocks_for(n), kThreads, 0, s>>>(r, n, x, y);
}

void round_rows(cudaStream_t s, Rounding r, int64_t rows, int64_t cols, int64_t ld, float* x) {
  if (rows * cols > 0) round_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(r, rows, cols, ld, x);
}

void multiply_by(cudaStream_t s, int64_t n, const float* factor, float* x) {
  if (n > 0) multiply_by_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, factor, x);
}

void loss_scale_check(cudaStream_t s, int64_t n, const float* g, LossScaleState* state) {
  if (n > 0) loss_scale_check_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, g, state);
}

void loss_scale_update(cudaStream_t s, LossScaleState* state) { loss_scale_update_kernel<<<1, 1, 0, s>>>(state); }

}  // namespace kx::backend::cuda
