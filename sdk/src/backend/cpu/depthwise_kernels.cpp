#include "backend/cpu/depthwise_kernels.hpp"

#include <algorithm>

#include "backend/cpu/target_clones.hpp"

namespace kx::backend::cpu {
namespace {

// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;
// Output channels one task of the filter gradient sums at a time (its accumulators stay in registers
// and L1).
constexpr int64_t kChannelBlock = 64;
// Taps of one kernel row whose filter gradients one pass over the output gradient sums (their
// accumulators: 4 KB of the stack).
constexpr int64_t kTapsAtOnce = 8;

// out[o] += x[o / m] * w[o] for o < channels * m: one tap of one output position. With one filter
// per channel (MobileNet's case) the three arrays run in step and the loop vectorises plainly.
KX_CLONES void tap_forward(int64_t channels, int64_t m, const float* x, const float* w, float* out) {
  if (m == 1) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) out[c] += x[c] * w[c];
    return;
  }
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < m; ++k) out[c * m + k] += x[c] * w[c * m + k];
}

// dx[c] += sum over k of w[c * m + k] * dy[c * m + k]: one tap's share of the input gradient.
KX_CLONES void tap_backward_input(int64_t channels, int64_t m, const float* w, const float* dy, float* dx) {
  if (m == 1) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) dx[c] += w[c] * dy[c];
    return;
  }
  for (int64_t c = 0; c < channels; ++c) {
    float s = 0.0f;
    for (int64_t k = 0; k < m; ++k) s += w[c * m + k] * dy[c * m + k];
    dx[c] += s;
  }
}

// acc[o] += x[(first + o) / m - first / m] * dy[o] for o < n: x points at the input channel of output
// channel `first`.
KX_CLONES void tap_backward_filter(int64_t first, int64_t n, int64_t m, const float* x, const float* dy, double* acc) {
  if (m == 1) {
#pragma omp simd
    for (int64_t o = 0; o < n; ++o) acc[o] += static_cast<double>(x[o]) * static_cast<double>(dy[o]);
    return;
  }
  for (int64_t o = 0; o < n; ++o)
    acc[o] += static_cast<double>(x[(first + o) / m - first / m]) * static_cast<double>(dy[o]);
}

// The input row (or column) of output index i at tap offset a (the tap times the dilation), or -1
// outside the input.
int64_t source(int64_t i, int64_t stride, int64_t a, int64_t pad, int64_t extent) {
  const int64_t v = i * stride + a - pad;
  return v >= 0 && v < extent ? v : -1;
}

}  // namespace

void depthwise_conv2d_forward(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                              const float* bias, float* y, int threads) {
  const int64_t C = g.channels, O = C * m, lines = rows * g.out_h;
  const int nt = lines * g.out_w * O >= kParallelValues ? threads : 1;
  // One output row of one sample per iteration; each output position sums its taps in window order.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t r = line / g.out_h, i = line % g.out_h;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out_row = y + line * g.out_w * O;
    for (int64_t j = 0; j < g.out_w; ++j) {
      float* out = out_row + j * O;
      std::fill(out, out + O, 0.0f);
      for (int64_t a = 0; a < g.k_h; ++a) {
        const int64_t yy = source(i, g.stride_h, a * g.dilation_h, g.pad_top, g.in_h);
        if (yy < 0) continue;
        for (int64_t b = 0; b < g.k_w; ++b) {
          const int64_t xx = source(j, g.stride_w, b * g.dilation_w, g.pad_left, g.in_w);
          if (xx < 0) continue;
          tap_forward(C, m, sample + (yy * g.in_w + xx) * C, w + (a * g.k_w + b) * O, out);
        }
      }
      if (bias) {
#pragma omp simd
        for (int64_t o = 0; o < O; ++o) out[o] += bias[o];
      }
    }
  }
}

void depthwise_conv2d_backward(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, int threads) {
  const int64_t C = g.channels, O = C * m, in_size = g.in_h * g.in_w * C, out_size = g.out_h * g.out_w * O;
  const int nt = rows * out_size >= kParallelValues ? threads : 1;
  if (dx) {
    // Sample by sample (each owns its dx); within one, outputs in order, scattering their taps.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < rows; ++r) {
      float* d = dx + r * in_size;
      std::fill(d, d + in_size, 0.0f);
      for (int64_t i = 0; i < g.out_h; ++i)
        for (int64_t j = 0; j < g.out_w; ++j) {
          const float* grad = dy + r * out_size + (i * g.out_w + j) * O;
          for (int64_t a = 0; a < g.k_h; ++a) {
            const int64_t yy = source(i, g.stride_h, a * g.dilation_h, g.pad_top, g.in_h);
            if (yy < 0) continue;
            for (int64_t b = 0; b < g.k_w; ++b) {
              const int64_t xx = source(j, g.stride_w, b * g.dilation_w, g.pad_left, g.in_w);
              if (xx < 0) continue;
              tap_backward_input(C, m, w + (a * g.k_w + b) * O, grad, d + (yy * g.in_w + xx) * C);
            }
          }
        }
    }
  }
  if (!dw) return;
  // One task per (row of taps, block of output channels): each output gradient is read once for up to
  // kTapsAtOnce taps of the row. Every tap's sum runs over samples and positions in a fixed order, in
  // double: the result does not depend on the thread count.
  const int64_t blocks = (O + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
  for (int64_t task = 0; task < g.k_h * blocks; ++task) {
    const int64_t a = task / blocks, first = (task % blocks) * kChannelBlock, n = std::min(kChannelBlock, O - first);
    for (int64_t b0 = 0; b0 < g.k_w; b0 += kTapsAtOnce) {
      const int64_t taps = std::min(kTapsAtOnce, g.k_w - b0);
      double acc[kTapsAtOnce * kChannelBlock] = {};
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < g.out_h; ++i) {
          const int64_t yy = source(i, g.stride_h, a * g.dilation_h, g.pad_top, g.in_h);
          if (yy < 0) continue;
          for (int64_t j = 0; j < g.out_w; ++j) {
            const float* grad = dy + r * out_size + (i * g.out_w + j) * O + first;
            for (int64_t t = 0; t < taps; ++t) {
              const int64_t xx = source(j, g.stride_w, (b0 + t) * g.dilation_w, g.pad_left, g.in_w);
              if (xx < 0) continue;
              const float* in = x + r * in_size + (yy * g.in_w + xx) * C + first / m;
              tap_backward_filter(first, n, m, in, grad, acc + t * kChannelBlock);
            }
          }
        }
      for (int64_t t = 0; t < taps; ++t) {
        float* out = dw + (a * g.k_w + b0 + t) * O + first;
        for (int64_t o = 0; o < n; ++o) out[o] = static_cast<float>(acc[t * kChannelBlock + o]);
      }
    }
  }
}

}  // namespace kx::backend::cpu
