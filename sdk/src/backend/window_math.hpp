// The backward passes of the sliding windows, one input element at a time, for the CUDA kernels (one
// thread per element) and for the CPU tests that check them against the CPU backend's loops.
//
// The CPU backend scatters: it walks the windows (i, j) in order and adds each one's share to the
// inputs it covers. A device thread gathers instead: it finds the windows that cover its input. For the
// float sums to be the same bits, the gather must visit the windows in the CPU's order, i rising then
// j rising. Input row y meets window row i at tap a = y + pad - i * stride, so i rising is a falling.
// Each addition is rounded on its own (rounded_math.hpp), as the CPU's `+=` is.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/host_device.hpp"
#include "backend/rounded_math.hpp"

namespace kx::backend {

// The window index along one axis whose tap `tap` covers coordinate `at` (padding `pad`), or -1.
KX_HOST_DEVICE inline int64_t covering_window(int64_t at, int64_t pad, int64_t tap, int64_t stride, int64_t windows) {
  const int64_t t = at + pad - tap;
  if (t < 0 || t % stride) return -1;
  const int64_t w = t / stride;
  return w < windows ? w : -1;
}

// dx[r, y, x, c] of im2col's adjoint: the sum of the column entries copied from it. The CPU's col2im
// adds by window row i rising, then by kernel column b rising (one window column j per b).
KX_HOST_DEVICE inline float col2im_value(const Window2d& g, const float* col, int64_t r, int64_t y, int64_t x,
                                         int64_t c) {
  const int64_t patch = g.k_h * g.k_w * g.channels;
  float sum = 0.0f;
  for (int64_t a = g.k_h - 1; a >= 0; --a) {
    const int64_t i = covering_window(y, g.pad_top, a * g.dilation_h, g.stride_h, g.out_h);
    if (i < 0) continue;
    for (int64_t b = 0; b < g.k_w; ++b) {
      const int64_t j = covering_window(x, g.pad_left, b * g.dilation_w, g.stride_w, g.out_w);
      if (j < 0) continue;
      sum = add_rn(sum, col[((r * g.out_h + i) * g.out_w + j) * patch + (a * g.k_w + b) * g.channels + c]);
    }
  }
  return sum;
}

// Calls f(i, j, a, b) for every pooling window (i, j) (no padding) that covers input (y, x) at tap
// (a, b), in the CPU's order: i rising, then j rising.
template <class F>
KX_HOST_DEVICE void for_each_covering_window(const Window2d& g, int64_t y, int64_t x, F f) {
  for (int64_t a = g.k_h - 1; a >= 0; --a) {
    const int64_t i = covering_window(y, 0, a, g.stride_h, g.out_h);
    if (i < 0) continue;
    for (int64_t b = g.k_w - 1; b >= 0; --b) {
      const int64_t j = covering_window(x, 0, b, g.stride_w, g.out_w);
      if (j >= 0) f(i, j, a, b);
    }
  }
}

// dx[r, y, x, c] of average pooling: the rounded share dy * (1 / window size) of each covering window.
KX_HOST_DEVICE inline float avg_pool_backward_value(const Window2d& g, const float* dy, int64_t r, int64_t y,
                                                    int64_t x, int64_t c) {
  const float inv = 1.0f / static_cast<float>(g.k_h * g.k_w);
  float sum = 0.0f;
  for_each_covering_window(g, y, x, [&](int64_t i, int64_t j, int64_t, int64_t) {
    sum = add_rn(sum, mul_rn(dy[((r * g.out_h + i) * g.out_w + j) * g.channels + c], inv));
  });
  return sum;
}

// dx[r, y, x, c] of max pooling: dy of every covering window whose first maximum (in window order) is
// this input. x is the layer's input and m its output (the windows' maxima).
KX_HOST_DEVICE inline float max_pool_backward_value(const Window2d& g, const float* x_in, const float* m,
                                                    const float* dy, int64_t r, int64_t y, int64_t x, int64_t c) {
  const auto at = [&](int64_t yy, int64_t xx) { return ((r * g.in_h + yy) * g.in_w + xx) * g.channels + c; };
  const float mine = x_in[at(y, x)];
  float sum = 0.0f;
  for_each_covering_window(g, y, x, [&](int64_t i, int64_t j, int64_t a, int64_t b) {
    const int64_t out = ((r * g.out_h + i) * g.out_w + j) * g.channels + c;
    if (mine != m[out]) return;
    for (int64_t a2 = 0; a2 <= a; ++a2)  // does an earlier tap of the window hold the maximum too?
      for (int64_t b2 = 0; b2 < (a2 == a ? b : g.k_w); ++b2)
        if (x_in[at(i * g.stride_h + a2, j * g.stride_w + b2)] == m[out]) return;
    sum = add_rn(sum, dy[out]);
  });
  return sum;
}

}  // namespace kx::backend
