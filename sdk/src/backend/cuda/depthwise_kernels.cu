// Depthwise convolution (Keras's DepthwiseConv2D) over channels-last samples. Forward and the input
// gradient gather, one thread per value, adding in the CPU backend's order (cpu/depthwise_kernels.cpp)
// with each operation rounded, so they give its bits; the filter gradient sums in double, one block per
// weight, in a fixed order (no atomics).
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/rounded_math.hpp"

namespace kx::backend::cuda {
namespace {

// One thread per output value y[r, i, j, o], o = c * m + k: its taps in window order, then the bias.
__global__ void depthwise_forward_kernel(Window2d g, int64_t m, int64_t rows, const float* x, const float* w,
                                         const float* bias, float* y) {
  const int64_t O = g.channels * m;
  KX_GRID_STRIDE(e, rows * g.out_h * g.out_w * O) {
    const int64_t o = e % O, j = (e / O) % g.out_w, i = (e / (O * g.out_w)) % g.out_h, r = e / (O * g.out_w * g.out_h);
    const int64_t c = o / m;
    float acc = 0.0f;
    for (int64_t a = 0; a < g.k_h; ++a) {
      const int64_t yy = i * g.stride_h + a * g.dilation_h - g.pad_top;
      if (yy < 0 || yy >= g.in_h) continue;
      for (int64_t b = 0; b < g.k_w; ++b) {
        const int64_t xx = j * g.stride_w + b * g.dilation_w - g.pad_left;
        if (xx < 0 || xx >= g.in_w) continue;
        acc = add_rn(acc, mul_rn(x[((r * g.in_h + yy) * g.in_w + xx) * g.channels + c], w[(a * g.k_w + b) * O + o]));
      }
    }
    y[e] = bias ? add_rn(acc, bias[o]) : acc;
  }
}

// One thread per input value dx[r, yy, xx, c]: the outputs its taps reach, in the order the CPU
// scatters them (outputs by row, then column: taps from the last to the first).
__global__ void depthwise_backward_input_kernel(Window2d g, int64_t m, int64_t rows, const float* w, const float* dy,
                                                float* dx) {
  const int64_t C = g.channels, O = C * m;
  KX_GRID_STRIDE(e, rows * g.in_h * g.in_w * C) {
    const int64_t c = e % C, xx = (e / C) % g.in_w, yy = (e / (C * g.in_w)) % g.in_h, r = e / (C * g.in_w * g.in_h);
    float acc = 0.0f;
    for (int64_t a = g.k_h - 1; a >= 0; --a) {
      const int64_t ti = yy + g.pad_top - a * g.dilation_h;
      if (ti < 0 || ti % g.stride_h != 0 || ti / g.stride_h >= g.out_h) continue;
      const int64_t i = ti / g.stride_h;
      for (int64_t b = g.k_w - 1; b >= 0; --b) {
        const int64_t tj = xx + g.pad_left - b * g.dilation_w;
        if (tj < 0 || tj % g.stride_w != 0 || tj / g.stride_w >= g.out_w) continue;
        const int64_t j = tj / g.stride_w;
        const float* grad = dy + ((r * g.out_h + i) * g.out_w + j) * O + c * m;
        const float* k = w + (a * g.k_w + b) * O + c * m;
        if (m == 1) {
          acc = add_rn(acc, mul_rn(k[0], grad[0]));
        } else {
          float s = 0.0f;
          for (int64_t q = 0; q < m; ++q) s = add_rn(s, mul_rn(k[q], grad[q]));
          acc = add_rn(acc, s);
        }
      }
    }
    dx[e] = acc;
  }
}

// One block per weight dw[a, b, o]: its threads sum strided positions (r, i, j) in double, then a tree
// in shared memory adds the threads' sums.
__global__ void depthwise_backward_filter_kernel(Window2d g, int64_t m, int64_t rows, const float* x, const float* dy,
                                                 float* dw) {
  __shared__ double part[kThreads];
  const int64_t O = g.channels * m, taps = g.k_h * g.k_w;
  for (int64_t weight = blockIdx.x; weight < taps * O; weight += gridDim.x) {
    const int64_t o = weight % O, tap = weight / O, a = tap / g.k_w, b = tap % g.k_w, c = o / m;
    double acc = 0.0;
    for (int64_t p = threadIdx.x; p < rows * g.out_h * g.out_w; p += blockDim.x) {
      const int64_t j = p % g.out_w, i = (p / g.out_w) % g.out_h, r = p / (g.out_w * g.out_h);
      const int64_t yy = i * g.stride_h + a * g.dilation_h - g.pad_top;
      const int64_t xx = j * g.stride_w + b * g.dilation_w - g.pad_left;
      if (yy < 0 || yy >= g.in_h || xx < 0 || xx >= g.in_w) continue;
      acc += static_cast<double>(x[((r * g.in_h + yy) * g.in_w + xx) * g.channels + c]) *
             static_cast<double>(dy[p * O + o]);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) dw[weight] = static_cast<float>(part[0]);
    __syncthreads();
  }
}

}  // namespace

void depthwise_conv2d_forward(cudaStream_t s, const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                              const float* w, const float* bias, float* y) {
  const int64_t n = rows * g.out_h * g.out_w * g.channels * multiplier;
  if (n == 0) return;
  depthwise_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, multiplier, rows, x, w, bias, y);
}

void depthwise_conv2d_backward(cudaStream_t s, const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                               const float* w, const float* dy, float* dx, float* dw) {
  const int64_t in = rows * g.in_h * g.in_w * g.channels, weights = g.k_h * g.k_w * g.channels * multiplier;
  if (dx && in > 0) depthwise_backward_input_kernel<<<blocks_for(in), kThreads, 0, s>>>(g, multiplier, rows, w, dy, dx);
  if (dw && weights > 0) {
    const unsigned blocks = static_cast<unsigned>(weights < 65535 * 16 ? weights : 65535 * 16);
    depthwise_backward_filter_kernel<<<blocks, kThreads, 0, s>>>(g, multiplier, rows, x, dy, dw);
  }
}

}  // namespace kx::backend::cuda
