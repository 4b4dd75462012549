// The integer mixes every random draw of kx derives from, shared by the host and the CUDA kernels so
// that a device draws exactly what the CPU draws.
#pragma once
#include <cstdint>

#include "backend/host_device.hpp"

namespace kx::backend {

// splitmix64's finaliser: a bijection that spreads every input bit over the output.
KX_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Two values into one seed: (seed of a fit, step) -> seed of the step, (step seed, layer) -> the
// layer's, and so on.
KX_HOST_DEVICE inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Dropout's keep-or-drop uniform in [0, 1) for element `index` under `key`.
KX_HOST_DEVICE inline float dropout_uniform(uint64_t key, uint64_t index) {
  return static_cast<float>(mix64(key ^ mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace kx::backend
