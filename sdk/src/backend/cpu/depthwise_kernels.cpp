#include "backend/cpu/depthwise_kernels.hpp"

#include <algorithm>

#include "backend/cpu/target_clones.hpp"

namespace kx::backend::cpu {
namespace {

// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;

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

// acc[o] += x[o / m] * dy[o] for o < channels * m: one tap's share of one sample's filter gradient.
KX_CLONES void tap_backward_filter(int64_t channels, int64_t m, const float* x, const float* dy, float* acc) {
  if (m == 1) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) acc[c] += x[c] * dy[c];
    return;
  }
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < m; ++k) acc[c * m + k] += x[c] * dy[c * m + k];
}

// dw[i] = the sum over samples of partials[r * n + i], in sample order and in double (a short pass:
// no vector clones, which would cost libkx more bytes than they save time).
void sum_sample_partials(int64_t rows, int64_t n, const float* partials, float* dw, int threads) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t first = blk * kBlock, count = std::min(kBlock, n - first);
    double acc[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = partials + r * n + first;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) acc[i] += static_cast<double>(p[i]);
    }
    for (int64_t i = 0; i < count; ++i) dw[first + i] = static_cast<float>(acc[i]);
  }
}

// The input row (or column) of output index i at tap offset a (the tap times the dilation), or -1
// outside the input.
int64_t source(int64_t i, int64_t stride, int64_t a, int64_t pad, int64_t extent) {
  const int64_t v = i * stride + a - pad;
  return v >= 0 && v < extent ? v : -1;
}

// f(tap, input position) for each tap of output position (i, j) inside the input, in window order.
template <class F>
inline void for_each_tap(const Window2d& g, int64_t i, int64_t j, F f) {
  for (int64_t a = 0; a < g.k_h; ++a) {
    const int64_t yy = source(i, g.stride_h, a * g.dilation_h, g.pad_top, g.in_h);
    if (yy < 0) continue;
    for (int64_t b = 0; b < g.k_w; ++b) {
      const int64_t xx = source(j, g.stride_w, b * g.dilation_w, g.pad_left, g.in_w);
      if (xx >= 0) f(a * g.k_w + b, yy * g.in_w + xx);
    }
  }
}

// Output positions [p0, p1) of y (positions counted over samples, rows and columns): each sums its
// taps in window order.
void forward_positions(const Window2d& g, int64_t m, const float* x, const float* w, const float* bias, float* y,
                       int64_t p0, int64_t p1) {
  const int64_t C = g.channels, O = C * m, per_sample = g.out_h * g.out_w;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t r = p / per_sample, i = p % per_sample / g.out_w, j = p % g.out_w;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out = y + p * O;
    std::fill(out, out + O, 0.0f);
    for_each_tap(g, i, j, [&](int64_t tap, int64_t at) { tap_forward(C, m, sample + at * C, w + tap * O, out); });
    if (bias) {
#pragma omp simd
      for (int64_t o = 0; o < O; ++o) out[o] += bias[o];
    }
  }
}

}  // namespace

void depthwise_conv2d_forward(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                              const float* bias, float* y, int threads) {
  depthwise_conv2d_forward_by_ranges(g, m, rows, x, w, bias, y, threads, g.out_w, {});
}

void depthwise_conv2d_forward_by_ranges(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                                        const float* bias, float* y, int threads, int64_t range_positions,
                                        RangeDone range_done) {
  const int64_t positions = rows * g.out_h * g.out_w, ranges = (positions + range_positions - 1) / range_positions;
  if (positions == 0) return;
  write_by_ranges(
      ranges, positions * g.channels * m >= kParallelValues ? threads : 1,
      [&](int64_t k) {
        forward_positions(g, m, x, w, bias, y, k * range_positions, std::min(positions, (k + 1) * range_positions));
      },
      range_done);
}

void depthwise_conv2d_backward(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* partials, int threads) {
  const int64_t C = g.channels, O = C * m, in_size = g.in_h * g.in_w * C, out_size = g.out_h * g.out_w * O;
  const int64_t taps = g.k_h * g.k_w;
  if (!dx && !dw) return;
  const int nt = rows * out_size >= kParallelValues ? threads : 1;
  // Sample by sample, one pass over its output gradient for both: each output position scatters its
  // taps into the sample's dx and adds them into the sample's filter-gradient partials (float32 sums
  // over one sample's positions, as short as a GEMM's over that sample would be). The partials are then
  // summed over the samples in order, in double: no result depends on the thread count.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* sample = x + r * in_size;
    float* d = dx ? dx + r * in_size : nullptr;
    float* part = dw ? partials + r * taps * O : nullptr;
    if (d) std::fill(d, d + in_size, 0.0f);
    if (part) std::fill(part, part + taps * O, 0.0f);
    for (int64_t i = 0; i < g.out_h; ++i)
      for (int64_t j = 0; j < g.out_w; ++j) {
        const float* grad = dy + r * out_size + (i * g.out_w + j) * O;
        for_each_tap(g, i, j, [&](int64_t tap, int64_t at) {
          if (d) tap_backward_input(C, m, w + tap * O, grad, d + at * C);
          if (part) tap_backward_filter(C, m, sample + at * C, grad, part + tap * O);
        });
      }
  }
  if (dw) sum_sample_partials(rows, taps * O, partials, dw, nt);
}

}  // namespace kx::backend::cpu
