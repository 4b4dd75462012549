#include "backend/cpu/activation_kernels.hpp"

#include "backend/activation_math.hpp"
#include "backend/cpu/target_clones.hpp"
#include "backend/seed_mix.hpp"

namespace kx::backend::cpu {

KX_CLONES void relu_backward_span(int64_t n, const float* y, const float* dy, float* dz) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dz[i] = relu_backward(y[i], dy[i]);
}

KX_CLONES void dropout_span(float rate, uint64_t seed, int64_t first, int64_t n, const float* x, float* mask,
                            float* y) {
  const float keep_scale = 1.0f / (1.0f - rate);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    // Element i's draw depends only on (seed, i), never on threads or order.
    const float u = dropout_uniform(seed, static_cast<uint64_t>(first + i));
    mask[i] = u >= rate ? keep_scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

}  // namespace kx::backend::cpu
