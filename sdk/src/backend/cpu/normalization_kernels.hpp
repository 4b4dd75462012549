// CPU kernels of batch normalisation over [rows, cols] (cols = channels, rows = samples x positions).
#pragma once
#include <cstdint>

#include "kx/layer.hpp"

namespace kx::backend::cpu {

void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var, int threads);
void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var, float epsilon,
                      const float* gamma, const float* beta, Activation act, float* y, int threads);
void batch_norm_backward(int64_t rows, int64_t cols, const float* x, float* dy, const float* mean, const float* var,
                         float epsilon, const float* gamma, const float* beta, Activation act, float* dx,
                         float* dgamma, float* dbeta, int threads);

// Layer normalisation over each row of [rows, cols] (backend_ops.hpp's layer_norm_forward/backward).
void layer_norm_forward(int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                        const float* beta, float* y, float* mean, float* inv_std, int threads);
void layer_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                         const float* inv_std, const float* gamma, float* dx, float* dgamma, float* dbeta,
                         int threads);

}  // namespace kx::backend::cpu
