// CPU kernels of 2-D windows over NHWC samples: im2col / col2im for convolutions, max and average pooling.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cpu {

void im2col(const Window2d& g, int64_t rows, const float* x, float* col, int threads);
void col2im(const Window2d& g, int64_t rows, const float* col, float* dx, int threads);
void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y, int threads);
void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy, float* dx,
                       int threads);
void avg_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y, int threads);
void avg_pool_backward(const Window2d& g, int64_t rows, const float* dy, float* dx, int threads);

}  // namespace kx::backend::cpu
