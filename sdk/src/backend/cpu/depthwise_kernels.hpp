// CPU kernels of the depthwise convolution (Keras's DepthwiseConv2D) over NHWC samples: direct loops
// over the window taps with the channel loop innermost, never im2col and a GEMM (each output reads
// k_h * k_w inputs of its own channel: a dense GEMM would multiply mostly zeros). With one filter per
// channel and at least sixteen channels, each output (or input-gradient) value sums its taps in
// registers and is stored once; every kernel adds in the same order, so which one runs changes no bit.
#pragma once
#include <cstdint>

#include "backend/cpu/range_done.hpp"
#include "backend/backend.hpp"

namespace kx::backend::cpu {

void depthwise_conv2d_forward(const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w,
                              const float* bias, float* y, int threads);
// The same values, cut into ranges of range_positions output positions (over samples, rows and
// columns), each computed by one thread; range_done(k) then runs on that thread while range k's
// positions of y are in its cache, and position 0 is final before any does (write_by_ranges).
void depthwise_conv2d_forward_by_ranges(const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                                        const float* w, const float* bias, float* y, int threads,
                                        int64_t range_positions, RangeDone range_done);
// dx and dw may each be null (not wanted); with dw, `partials` holds rows * k_h * k_w * channels *
// multiplier floats of scratch (depthwise_filter_partials).
void depthwise_conv2d_backward(const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* partials, int threads);
inline int64_t depthwise_filter_partials(const Window2d& g, int64_t multiplier, int64_t rows) {
  return rows * g.k_h * g.k_w * g.channels * multiplier;
}

}  // namespace kx::backend::cpu
