#include "backend/cpu/activation_kernels.hpp"

#include "backend/cpu/target_clones.hpp"

namespace kx::backend::cpu {

namespace {

// splitmix64's finaliser: element i's value depends only on (seed, i), never on threads or order.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

KX_CLONES void relu_backward_span(int64_t n, const float* y, const float* dy, float* dz) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dz[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

KX_CLONES void dropout_span(float rate, uint64_t seed, int64_t first, int64_t n, const float* x, float* mask,
                            float* y) {
  const float keep_scale = 1.0f / (1.0f - rate);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = mix64(seed ^ mix64(static_cast<uint64_t>(first + i)));
    const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
    mask[i] = u >= rate ? keep_scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

}  // namespace kx::backend::cpu
