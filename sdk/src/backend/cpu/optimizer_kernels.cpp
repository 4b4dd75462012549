// Optimizer kernels. The Adam update is bound by square roots and divisions at SSE width: hence the
// AVX-512 and AVX2 clones (KX_CLONES; RMSprop, the larger, stops at AVX2).
#include "backend/cpu/optimizer_kernels.hpp"

#include <cmath>

#include "backend/cpu/target_clones.hpp"
#include "backend/optimizer_math.hpp"

namespace kx::backend::cpu {

KX_CLONES void adam_span(int64_t n, float* __restrict p, const float* __restrict g, float* __restrict m,
                         float* __restrict v, const AdamStep& s) {
  const float lr_t = s.lr_t, epsilon = s.epsilon;
  const float one_minus_b1 = s.one_minus_beta1, one_minus_b2 = s.one_minus_beta2, factor = s.grad_factor;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * factor;
    const float mi = m[i] + one_minus_b1 * (gi - m[i]);
    const float vi = v[i] + one_minus_b2 * (gi * gi - v[i]);
    m[i] = mi;
    v[i] = vi;
    p[i] -= (mi * lr_t) / (std::sqrt(vi) + epsilon);
  }
}

// AdamW's decay before Adam's step (adam_span), a pass over p that is bound by memory: no clones.
void weight_decay_span(int64_t n, float* __restrict p, float lr, float weight_decay) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) p[i] = weight_decayed(p[i], weight_decay, lr);
}

KX_CLONES_AVX2 void rmsprop_span(int64_t n, float* __restrict p, const float* __restrict g, float* __restrict v,
                            float* __restrict m, float* __restrict a, const RmsPropConstants& c, float lr,
                            float grad_factor) {
  // The four variants apart, so that each loop vectorises without tests of m and a.
  if (!m && !a) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) p[i] = rmsprop_step(p[i], g[i] * grad_factor, v[i], nullptr, nullptr, c, lr);
  } else if (!a) {
    for (int64_t i = 0; i < n; ++i) p[i] = rmsprop_step(p[i], g[i] * grad_factor, v[i], m + i, nullptr, c, lr);
  } else if (!m) {
    for (int64_t i = 0; i < n; ++i) p[i] = rmsprop_step(p[i], g[i] * grad_factor, v[i], nullptr, a + i, c, lr);
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] = rmsprop_step(p[i], g[i] * grad_factor, v[i], m + i, a + i, c, lr);
  }
}

}  // namespace kx::backend::cpu
