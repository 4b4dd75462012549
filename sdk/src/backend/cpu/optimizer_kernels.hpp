// Element-wise optimizer kernels over one contiguous span of the parameter arena.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cpu {

struct AdamStep {
  float lr_t;  // learning rate with the bias corrections folded in (adam_math.hpp)
  float one_minus_beta1, one_minus_beta2, epsilon;
  float grad_factor = 1.0f;  // g is multiplied by it first (a loss scale's 1/scale)
};

// Keras 3's update: p -= (m * lr_t) / (sqrt(v) + epsilon) after the moment updates, for n elements.
void adam_span(int64_t n, float* p, const float* g, float* m, float* v, const AdamStep& s);
// AdamW's decay, p -= p * weight_decay * lr (optimizer_math.hpp), before Adam's step: the same operations
// as optimizer_math.hpp's adam_step after weight_decayed, so the same bits as one loop of both.
void weight_decay_span(int64_t n, float* p, float lr, float weight_decay);
// RMSprop (optimizer_math.hpp); m and a may be null.
void rmsprop_span(int64_t n, float* p, const float* g, float* v, float* m, float* a, const RmsPropConstants& c,
                  float lr, float grad_factor);

}  // namespace kx::backend::cpu
