// Sliding-window kernels over channels-last samples: im2col and its adjoint, max and average pooling.
// The backward passes gather (each input position sums what reaches it) instead of scattering with
// atomics: no write conflicts, and the sums are added in the CPU backend's order, so they are its bits
// (window_math.hpp; tests/unit/test_window_math.cpp checks that order on the CPU). The forward passes
// read each window in the CPU's order too.
#include <cmath>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/window_math.hpp"

namespace kx::backend::cuda {
namespace {

// One thread per column entry: col[(r, i, j), (a, b, c)].
__global__ void im2col_kernel(Window2d g, int64_t rows, const float* x, float* col) {
  const int64_t patch = g.k_h * g.k_w * g.channels, positions = g.out_h * g.out_w;
  KX_GRID_STRIDE(e, rows * positions * patch) {
    const int64_t p = e % patch, q = e / patch;
    const int64_t c = p % g.channels, ab = p / g.channels;
    const int64_t b = ab % g.k_w, a = ab / g.k_w;
    const int64_t j = q % g.out_w, i = (q / g.out_w) % g.out_h, r = q / positions;
    const int64_t yy = i * g.stride_h + a * g.dilation_h - g.pad_top;
    const int64_t xx = j * g.stride_w + b * g.dilation_w - g.pad_left;
    col[e] = (yy >= 0 && yy < g.in_h && xx >= 0 && xx < g.in_w)
                 ? x[((r * g.in_h + yy) * g.in_w + xx) * g.channels + c]
                 : 0.0f;
  }
}

// One thread per input element, summing in the CPU's order (window_math.hpp).
__global__ void col2im_kernel(Window2d g, int64_t rows, const float* col, float* dx) {
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * g.channels) {
    const int64_t c = e % g.channels, x = (e / g.channels) % g.in_w, y = (e / (g.channels * g.in_w)) % g.in_h;
    dx[e] = col2im_value(g, col, e / (g.channels * g.in_w * g.in_h), y, x, c);
  }
}

__global__ void max_pool_forward_kernel(Window2d g, int64_t rows, const float* x, float* y) {
  KX_GRID_STRIDE(e, rows * g.out_h * g.out_w * g.channels) {
    const int64_t c = e % g.channels, j = (e / g.channels) % g.out_w, i = (e / (g.channels * g.out_w)) % g.out_h;
    const int64_t r = e / (g.channels * g.out_w * g.out_h);
    // From the first tap on, as the CPU's std::max: a NaN there stays, a later NaN is passed over.
    const float* w = x + ((r * g.in_h + i * g.stride_h) * g.in_w + j * g.stride_w) * g.channels + c;
    float best = w[0];
    for (int64_t a = 0; a < g.k_h; ++a)
      for (int64_t b = 0; b < g.k_w; ++b) {
        const float v = w[(a * g.in_w + b) * g.channels];
        best = best < v ? v : best;
      }
    y[e] = best;
  }
}

// Each input position gathers dy of every window whose first maximum it holds.
__global__ void max_pool_backward_kernel(Window2d g, int64_t rows, const float* x, const float* y, const float* dy,
                                         float* dx) {
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * g.channels) {
    const int64_t c = e % g.channels, xx = (e / g.channels) % g.in_w, yy = (e / (g.channels * g.in_w)) % g.in_h;
    dx[e] = max_pool_backward_value(g, x, y, dy, e / (g.channels * g.in_w * g.in_h), yy, xx, c);
  }
}

__global__ void avg_pool_forward_kernel(Window2d g, int64_t rows, const float* x, float* y) {
  const float inv = 1.0f / static_cast<float>(g.k_h * g.k_w);
  KX_GRID_STRIDE(e, rows * g.out_h * g.out_w * g.channels) {
    const int64_t c = e % g.channels, p = e / g.channels;
    const int64_t j = p % g.out_w, i = (p / g.out_w) % g.out_h, r = p / (g.out_w * g.out_h);
    float s = 0;  // window order, as the CPU adds
    for (int64_t a = 0; a < g.k_h; ++a)
      for (int64_t b = 0; b < g.k_w; ++b)
        s = __fadd_rn(s, x[((r * g.in_h + i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * g.channels + c]);
    y[e] = __fmul_rn(s, inv);
  }
}

// Each input position gathers dy / window size from every window that covers it.
__global__ void avg_pool_backward_kernel(Window2d g, int64_t rows, const float* dy, float* dx) {
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * g.channels) {
    const int64_t c = e % g.channels, xx = (e / g.channels) % g.in_w, yy = (e / (g.channels * g.in_w)) % g.in_h;
    dx[e] = avg_pool_backward_value(g, dy, e / (g.channels * g.in_w * g.in_h), yy, xx, c);
  }
}

}  // namespace

void im2col(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, float* col) {
  const int64_t n = rows * g.out_h * g.out_w * g.patch();
  if (n) im2col_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, rows, x, col);
}

void col2im(cudaStream_t s, const Window2d& g, int64_t rows, const float* col, float* dx) {
  const int64_t n = rows * g.in_h * g.in_w * g.channels;
  if (n) col2im_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, rows, col, dx);
}

void max_pool_forward(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, float* y) {
  const int64_t n = rows * g.out_h * g.out_w * g.channels;
  if (n) max_pool_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, rows, x, y);
}

void max_pool_backward(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, const float* y,
                       const float* dy, float* dx) {
  const int64_t n = rows * g.in_h * g.in_w * g.channels;
  if (n) max_pool_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, rows, x, y, dy, dx);
}

void avg_pool_forward(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, float* y) {
  const int64_t n = rows * g.out_h * g.out_w * g.channels;
  if (n) avg_pool_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, rows, x, y);
}

void avg_pool_backward(cudaStream_t s, const Window2d& g, int64_t rows, const float* dy, float* dx) {
  const int64_t n = rows * g.in_h * g.in_w * g.channels;
  if (n) avg_pool_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, rows, dy, dx);
}

}  // namespace kx::backend::cuda
