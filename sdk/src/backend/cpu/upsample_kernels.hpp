// CPU kernels of UpSampling2D over NHWC samples (nearest and TensorFlow's bilinear; resize_math.hpp).
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cpu {

void upsample2d_forward(const Upsample2d& u, int64_t rows, const float* x, float* y, int threads);
void upsample2d_backward(const Upsample2d& u, int64_t rows, const float* dy, float* dx, int threads);

}  // namespace kx::backend::cpu
