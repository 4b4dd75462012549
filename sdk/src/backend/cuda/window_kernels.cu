// Sliding-window kernels over channels-last samples: im2col and its adjoint, max and average pooling.
// gather (each input position sums what reaches it, in window order) instead of scattering with
// atomics: no write conflicts, and results repeat bitwise.
#include <cmath>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"

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
    const int64_t yy = i * g.stride_h + a - g.pad_top, xx = j * g.stride_w + b - g.pad_left;
    col[e] = (yy >= 0 && yy < g.in_h && xx >= 0 && xx < g.in_w)
                 ? x[((r * g.in_h + yy) * g.in_w + xx) * g.channels + c]
                 : 0.0f;
  }
}

// The window positions (i, a) along one axis that cover input coordinate y: y = i * stride + a - pad.
__global__ void col2im_kernel(Window2d g, int64_t rows, const float* col, float* dx) {
  const int64_t patch = g.k_h * g.k_w * g.channels;
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * g.channels) {
    const int64_t c = e % g.channels, xx = (e / g.channels) % g.in_w, yy = (e / (g.channels * g.in_w)) % g.in_h;
    const int64_t r = e / (g.channels * g.in_w * g.in_h);
    float sum = 0;
    for (int64_t a = 0; a < g.k_h; ++a) {
      const int64_t ty = yy + g.pad_top - a;
      if (ty < 0 || ty % g.stride_h) continue;
      const int64_t i = ty / g.stride_h;
      if (i >= g.out_h) continue;
      for (int64_t b = 0; b < g.k_w; ++b) {
        const int64_t tx = xx + g.pad_left - b;
        if (tx < 0 || tx % g.stride_w) continue;
        const int64_t j = tx / g.stride_w;
        if (j >= g.out_w) continue;
        sum += col[((r * g.out_h + i) * g.out_w + j) * patch + (a * g.k_w + b) * g.channels + c];
      }
    }
    dx[e] = sum;
  }
}

__global__ void max_pool_forward_kernel(Window2d g, int64_t rows, const float* x, float* y) {
  KX_GRID_STRIDE(e, rows * g.out_h * g.out_w * g.channels) {
    const int64_t c = e % g.channels, j = (e / g.channels) % g.out_w, i = (e / (g.channels * g.out_w)) % g.out_h;
    const int64_t r = e / (g.channels * g.out_w * g.out_h);
    float best = -INFINITY;
    for (int64_t a = 0; a < g.k_h; ++a)
      for (int64_t b = 0; b < g.k_w; ++b)
        best = fmaxf(best, x[((r * g.in_h + i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * g.channels + c]);
    y[e] = best;
  }
}

// Calls f(i, j, a, b) for every window (i, j) that covers input position (yy, xx) of a pooling
// window g (no padding), at offset (a, b) inside it, in window order.
template <class F>
__device__ void for_each_covering_window(const Window2d& g, int64_t yy, int64_t xx, F f) {
  for (int64_t a = 0; a < g.k_h; ++a) {
    const int64_t ty = yy - a;
    if (ty < 0 || ty % g.stride_h) continue;
    const int64_t i = ty / g.stride_h;
    if (i >= g.out_h) continue;
    for (int64_t b = 0; b < g.k_w; ++b) {
      const int64_t tx = xx - b;
      if (tx < 0 || tx % g.stride_w) continue;
      const int64_t j = tx / g.stride_w;
      if (j >= g.out_w) continue;
      f(i, j, a, b);
    }
  }
}

// Each input position gathers dy of every window whose first maximum it holds.
__global__ void max_pool_backward_kernel(Window2d g, int64_t rows, const float* x, const float* y, const float* dy,
                                         float* dx) {
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * g.channels) {
    const int64_t c = e % g.channels, xx = (e / g.channels) % g.in_w, yy = (e / (g.channels * g.in_w)) % g.in_h;
    const int64_t r = e / (g.channels * g.in_w * g.in_h);
    float sum = 0;
    for_each_covering_window(g, yy, xx, [&](int64_t i, int64_t j, int64_t a, int64_t b) {
      const int64_t out = ((r * g.out_h + i) * g.out_w + j) * g.channels + c;
      const float m = y[out];
      // Is (a, b) the first position of window (i, j) that holds its maximum?
      bool first = true;
      for (int64_t a2 = 0; a2 < g.k_h && first; ++a2)
        for (int64_t b2 = 0; b2 < g.k_w; ++b2) {
          if (a2 == a && b2 == b) {
            a2 = g.k_h;  // reached (a, b): nothing before it holds the maximum
            break;
          }
          if (x[((r * g.in_h + i * g.stride_h + a2) * g.in_w + j * g.stride_w + b2) * g.channels + c] == m) {
            first = false;
            break;
          }
        }
      if (first && x[e] == m) sum += dy[out];
    });
    dx[e] = sum;
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
  const float inv = 1.0f / static_cast<float>(g.k_h * g.k_w);
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * g.channels) {
    const int64_t c = e % g.channels, xx = (e / g.channels) % g.in_w, yy = (e / (g.channels * g.in_w)) % g.in_h;
    const int64_t r = e / (g.channels * g.in_w * g.in_h);
    float sum = 0;
    for_each_covering_window(g, yy, xx, [&](int64_t i, int64_t j, int64_t, int64_t) {
      sum += dy[((r * g.out_h + i) * g.out_w + j) * g.channels + c] * inv;
    });
    dx[e] = sum;
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
