// Layer normalisation's per-element formulas, shared by the CPU and the CUDA kernels so that, given
// the same row statistics, both store the same bits. Keras 3 computes inv = rsqrt(var + epsilon) *
// gamma, then y = x * inv + (beta - mean * inv); the same order here, each operation rounded.
#pragma once

#include <cmath>

#include "backend/host_device.hpp"
#include "backend/rounded_math.hpp"

namespace kx::backend {

// 1 / sqrt(var + epsilon) of a row whose biased variance (in double) is var.
KX_HOST_DEVICE inline float layer_norm_inv_std(double var, float epsilon) {
  return static_cast<float>(1.0 / sqrt(var + static_cast<double>(epsilon)));
}

KX_HOST_DEVICE inline float layer_norm_value(float x, float mean, float inv_std, const float* gamma,
                                             const float* beta, int64_t c) {
  const float scale = gamma ? mul_rn(inv_std, gamma[c]) : inv_std;
  const float shift = beta ? sub_rn(beta[c], mul_rn(mean, scale)) : -mul_rn(mean, scale);
  return add_rn(mul_rn(x, scale), shift);
}

// dx of one element from the row's sums in double: a = sum(dy * gamma), b = sum(dy * gamma * xhat), for
// xhat = (x - mean) * inv_std: dx = inv_std * (dy * gamma - a / n - xhat * b / n).
KX_HOST_DEVICE inline float layer_norm_input_grad(float x, float dy, float mean, float inv_std, float gamma, double a,
                                                  double b, double n) {
  const double xhat = (static_cast<double>(x) - mean) * inv_std;
  return static_cast<float>(inv_std * (static_cast<double>(dy) * gamma - a / n - xhat * b / n));
}

}  // namespace kx::backend
