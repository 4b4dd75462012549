// Element-wise optimizer kernels over one contiguous span of the parameter arena.
#pragma once
#include <cstdint>

namespace kx::backend::cpu {

struct AdamStep {
  float lr_t;  // learning rate with the bias corrections folded in (adam_math.hpp)
  float one_minus_beta1, one_minus_beta2, epsilon;
  float grad_factor = 1.0f;  // g is multiplied by it first (a loss scale's 1/scale)
};

// Keras 3's update: p -= (m * lr_t) / (sqrt(v) + epsilon) after the moment updates, for n elements.
void adam_span(int64_t n, float* p, const float* g, float* m, float* v, const AdamStep& s);

}  // namespace kx::backend::cpu
