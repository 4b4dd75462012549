// Depthwise convolution (Keras's DepthwiseConv2D) over channels-last samples. Forward and the input
// gradient gather, one thread per value, adding in the CPU backend's order (cpu/depthwise_kernels.cpp)
// with each operation rounded, so they give its bits; the filter gradient sums in double, in a fixed
// order (no atomics).
#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/rounded_math.hpp"

namespace kx::backend::cuda {
namespace {

// The window's sizes in the index type of a launch: 32-bit where every index fits, since 64-bit
// division costs several times more and these kernels divide for each value.
template <class I>
struct Window {
  I in_h, in_w, channels, k_h, k_w, stride_h, stride_w, pad_top, pad_left, out_h, out_w, dilation_h, dilation_w;
};

template <class I>
Window<I> window_in(const Window2d& g) {
  return {static_cast<I>(g.in_h),       static_cast<I>(g.in_w),      static_cast<I>(g.channels),
          static_cast<I>(g.k_h),        static_cast<I>(g.k_w),       static_cast<I>(g.stride_h),
          static_cast<I>(g.stride_w),   static_cast<I>(g.pad_top),   static_cast<I>(g.pad_left),
          static_cast<I>(g.out_h),      static_cast<I>(g.out_w),     static_cast<I>(g.dilation_h),
          static_cast<I>(g.dilation_w)};
}

// Below this many values (input, output and filter alike) a launch indexes in 32 bits; the margin keeps a
// grid-stride step from overflowing.
constexpr int64_t kInt32IndexLimit = int64_t{1} << 30;

// Outputs per thread of the forward kernel: neighbours along a row, which share each tap's weight (read
// once for all of them) and most of their inputs.
constexpr int kRowOutputs = 8;

// One thread per kRowOutputs neighbouring output values y[r, i, j .., o], o = c * m + k: each
// sums its taps in window order, then the bias.
template <class I>
__global__ void depthwise_forward_kernel(Window<I> g, I m, I n, const float* x, const float* w, const float* bias,
                                         float* y) {
  const I O = g.channels * m, groups = (g.out_w + kRowOutputs - 1) / kRowOutputs;
  KX_GRID_STRIDE_OF(I, e, n) {
    const I q = e / O, o = e - q * O, q2 = q / groups, j0 = (q - q2 * groups) * kRowOutputs, r = q2 / g.out_h,
            i = q2 - r * g.out_h;
    const I c = m == 1 ? o : o / m;
    float acc[kRowOutputs] = {};
    for (I a = 0; a < g.k_h; ++a) {
      const I yy = i * g.stride_h + a * g.dilation_h - g.pad_top;
      if (yy < 0 || yy >= g.in_h) continue;
      const float* row = x + (r * g.in_h + yy) * g.in_w * g.channels + c;
      for (I b = 0; b < g.k_w; ++b) {
        const float tap = w[(a * g.k_w + b) * O + o];
#pragma unroll
        for (int t = 0; t < kRowOutputs; ++t) {
          const I xx = (j0 + t) * g.stride_w + b * g.dilation_w - g.pad_left;
          if (xx >= 0 && xx < g.in_w) acc[t] = add_rn(acc[t], mul_rn(row[xx * g.channels], tap));
        }
      }
    }
    float* out = y + ((r * g.out_h + i) * g.out_w + j0) * O + o;
#pragma unroll
    for (int t = 0; t < kRowOutputs; ++t)
      if (j0 + t < g.out_w) out[t * O] = bias ? add_rn(acc[t], bias[o]) : acc[t];
  }
}

// One thread per input value dx[r, yy, xx, c]: the outputs its taps reach, in the order the CPU
// scatters them (outputs by row, then column: taps from the last to the first). Unit: both strides are
// 1 (most depthwise layers), where no tap divides.
template <class I, bool Unit>
__global__ void depthwise_backward_input_kernel(Window<I> g, I m, I n, const float* w, const float* dy, float* dx) {
  const I C = g.channels, O = C * m;
  KX_GRID_STRIDE_OF(I, e, n) {
    const I q = e / C, c = e - q * C, q2 = q / g.in_w, xx = q - q2 * g.in_w, r = q2 / g.in_h, yy = q2 - r * g.in_h;
    float acc = 0.0f;
    for (I a = g.k_h - 1; a >= 0; --a) {
      const I ti = yy + g.pad_top - a * g.dilation_h;
      if (ti < 0 || (!Unit && ti % g.stride_h != 0)) continue;
      const I i = Unit ? ti : ti / g.stride_h;
      if (i >= g.out_h) continue;
      for (I b = g.k_w - 1; b >= 0; --b) {
        const I tj = xx + g.pad_left - b * g.dilation_w;
        if (tj < 0 || (!Unit && tj % g.stride_w != 0)) continue;
        const I j = Unit ? tj : tj / g.stride_w;
        if (j >= g.out_w) continue;
        const float* grad = dy + ((r * g.out_h + i) * g.out_w + j) * O + c * m;
        const float* k = w + (a * g.k_w + b) * O + c * m;
        if (m == 1) {
          acc = add_rn(acc, mul_rn(k[0], grad[0]));
        } else {
          float s = 0.0f;
          for (I q = 0; q < m; ++q) s = add_rn(s, mul_rn(k[q], grad[q]));
          acc = add_rn(acc, s);
        }
      }
    }
    dx[e] = acc;
  }
}

// The filter gradient is a column sum: row p = (r, i, j) is an output position, column o an output
// channel, and tap (a, b) adds x[r, i * stride + a * dilation - pad, ..., c] * dy[p, o]. Summed by
// column_sums (column_sums.cuh) up to kDepthwiseTapsPerPass taps at a time: a warp reads 32
// neighbouring channels of one position, so every load is coalesced, and the sums are in double in an
// order fixed by the shapes alone.
constexpr int kDepthwiseTapsPerPass = kColumnMaxSums;

// Index arithmetic in I (window_in); the pass's taps walked row by row from (first_a, first_b), so that
// no tap divides.
template <class I>
struct DepthwiseFilterTerms {
  Window<I> g;
  I m, O;
  int first_a, first_b, taps;
  const float* x;
  const float* dy;
  __device__ void operator()(int64_t row, int64_t col, double* acc) const {
    const I p = static_cast<I>(row), o = static_cast<I>(col);
    const I q = p / g.out_w, j = p - q * g.out_w, r = q / g.out_h, i = q - r * g.out_h;
    const I c = m == 1 ? o : o / m;
    const double d = dy[p * O + o];
    const I top = i * g.stride_h - g.pad_top, left = j * g.stride_w - g.pad_left;
    const float* sample = x + r * g.in_h * g.in_w * g.channels + c;
    I a = first_a, b = first_b;
#pragma unroll
    for (int k = 0; k < kDepthwiseTapsPerPass; ++k) {
      if (k >= taps) break;
      const I yy = top + a * g.dilation_h, xx = left + b * g.dilation_w;
      if (yy >= 0 && yy < g.in_h && xx >= 0 && xx < g.in_w)
        acc[k] += static_cast<double>(sample[(yy * g.in_w + xx) * g.channels]) * d;
      if (++b == g.k_w) {
        b = 0;
        ++a;
      }
    }
  }
};

struct StoreFilterTaps {
  float* dw;
  int64_t O;
  int first_tap, taps;
  __device__ void operator()(int64_t o, const double* sums) const {
    for (int k = 0; k < taps; ++k) dw[(first_tap + k) * O + o] = static_cast<float>(sums[k]);
  }
};

bool fits_int32(const Window2d& g, int64_t multiplier, int64_t rows) {
  return rows * g.in_h * g.in_w * g.channels < kInt32IndexLimit &&
         rows * g.out_h * g.out_w * g.channels * multiplier < kInt32IndexLimit &&
         g.k_h * g.k_w * g.channels * multiplier < kInt32IndexLimit;
}

// launch(I{}) with I = int32_t where the shapes fit it (fits_int32), else int64_t.
template <class Launch>
void with_index_type(const Window2d& g, int64_t multiplier, int64_t rows, const Launch& launch) {
  if (fits_int32(g, multiplier, rows))
    launch(int32_t{});
  else
    launch(int64_t{});
}

}  // namespace

void depthwise_conv2d_forward(cudaStream_t s, const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                              const float* w, const float* bias, float* y) {
  // One thread per kRowOutputs outputs of a row (the last group of a row may hold fewer).
  const int64_t n = rows * g.out_h * ((g.out_w + kRowOutputs - 1) / kRowOutputs) * g.channels * multiplier;
  if (n == 0) return;
  with_index_type(g, multiplier, rows, [&](auto index) {
    using I = decltype(index);
    depthwise_forward_kernel<I><<<blocks_for(n), kThreads, 0, s>>>(window_in<I>(g), static_cast<I>(multiplier),
                                                                    static_cast<I>(n), x, w, bias, y);
  });
}

void depthwise_conv2d_backward(cudaStream_t s, const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                               const float* w, const float* dy, float* dx, float* dw, double* scratch) {
  const int64_t in = rows * g.in_h * g.in_w * g.channels, O = g.channels * multiplier;
  if (dx && in > 0) {
    const bool unit = g.stride_h == 1 && g.stride_w == 1;
    with_index_type(g, multiplier, rows, [&](auto index) {
      using I = decltype(index);
      const auto kernel = unit ? depthwise_backward_input_kernel<I, true> : depthwise_backward_input_kernel<I, false>;
      kernel<<<blocks_for(in), kThreads, 0, s>>>(window_in<I>(g), static_cast<I>(multiplier), static_cast<I>(in), w,
                                                  dy, dx);
    });
  }
  if (!dw || O == 0) return;
  const int64_t positions = rows * g.out_h * g.out_w;
  const int taps = static_cast<int>(g.k_h * g.k_w);
  for (int first = 0; first < taps; first += kDepthwiseTapsPerPass) {
    const int n = std::min(kDepthwiseTapsPerPass, taps - first);
    const int a = first / static_cast<int>(g.k_w), b = first % static_cast<int>(g.k_w);
    with_index_type(g, multiplier, rows, [&](auto index) {
      using I = decltype(index);
      column_sums<kDepthwiseTapsPerPass>(
          s, positions, O,
          DepthwiseFilterTerms<I>{window_in<I>(g), static_cast<I>(multiplier), static_cast<I>(O), a, b, n, x, dy},
          StoreFilterTaps{dw, O, first, n}, scratch);
    });
  }
}

}  // namespace kx::backend::cuda
