// UpSampling2D over NHWC samples, one thread per value, computing what the CPU backend computes with
// the same shared formulas (resize_math.hpp): the same bits.
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/resize_math.hpp"

namespace kx::backend::cuda {
namespace {

__global__ void upsample2d_forward_kernel(Upsample2d u, int64_t rows, const float* x, float* y) {
  const int64_t C = u.channels, out_h = u.in_h * u.size_h, out_w = u.in_w * u.size_w;
  KX_GRID_STRIDE(e, rows * out_h * out_w * C) {
    const int64_t c = e % C, ox = (e / C) % out_w, oy = (e / (C * out_w)) % out_h, r = e / (C * out_w * out_h);
    y[e] = u.interpolation == Interpolation::Nearest
               ? x[((r * u.in_h + oy / u.size_h) * u.in_w + ox / u.size_w) * C + c]
               : bilinear_value(u, x, r, oy, ox, c);
  }
}

__global__ void upsample2d_backward_kernel(Upsample2d u, int64_t rows, const float* dy, float* dx) {
  const int64_t C = u.channels;
  KX_GRID_STRIDE(e, rows * u.in_h * u.in_w * C) {
    const int64_t c = e % C, x = (e / C) % u.in_w, y = (e / (C * u.in_w)) % u.in_h, r = e / (C * u.in_w * u.in_h);
    dx[e] = u.interpolation == Interpolation::Nearest ? nearest_input_grad(u, dy, r, y, x, c)
                                                      : bilinear_input_grad(u, dy, r, y, x, c);
  }
}

}  // namespace

void upsample2d_forward(cudaStream_t s, const Upsample2d& u, int64_t rows, const float* x, float* y) {
  const int64_t n = rows * u.in_h * u.size_h * u.in_w * u.size_w * u.channels;
  if (n) upsample2d_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(u, rows, x, y);
}

void upsample2d_backward(cudaStream_t s, const Upsample2d& u, int64_t rows, const float* dy, float* dx) {
  const int64_t n = rows * u.in_h * u.in_w * u.channels;
  if (n) upsample2d_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(u, rows, dy, dx);
}

}  // namespace kx::backend::cuda
