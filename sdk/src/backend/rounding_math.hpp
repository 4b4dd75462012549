// Rounding float32 values to bfloat16 and float16, kept in float32: how mixed precision stores its
// 16-bit tensors. Round to nearest, ties to even, as TensorFlow's casts; NaN stays NaN, values beyond
// the type's range become infinite, float16's subnormals are kept. Shared by the CPU kernels and the
// CUDA ones (KX_HOST_DEVICE), so a GPU rounds exactly as the CPU does.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/host_device.hpp"

namespace kx::backend {

// A 16-bit type that float32 values are rounded to, the result stored as float32: mixed precision
// keeps its tensors in float32 buffers holding 16-bit values.
enum class Rounding : int32_t { None = 0, BFloat16 = 1, Float16 = 2 };

KX_HOST_DEVICE inline uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

KX_HOST_DEVICE inline float bits_float(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The bfloat16 nearest to x: the upper 16 bits of float32 after rounding the lower 16 away.
KX_HOST_DEVICE inline float round_bfloat16(float x) {
  const uint32_t b = float_bits(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return bits_float((b | 0x00400000u) & 0xFFFF0000u);  // a quiet NaN
  return bits_float((b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u);
}

// The float16 nearest to x (11 significant bits, largest finite 65504, subnormals down to 2^-24).
KX_HOST_DEVICE inline float round_float16(float x) {
  const uint32_t b = float_bits(x), sign = b & 0x80000000u, a = b ^ sign;
  if (a >= 0x7F800000u) return x;                          // infinite or NaN
  if (a >= 0x477FF000u) return bits_float(sign | 0x7F800000u);  // 65520 and above: beyond float16
  if (a >= 0x38800000u)                                    // normal in float16 (2^-14 and above)
    return bits_float(sign | ((a + 0x0FFFu + ((a >> 13) & 1u)) & ~0x1FFFu));
  // Subnormal in float16: a multiple of 2^-24 (the scaling is exact; nearbyint rounds ties to even).
  const float q = nearbyintf(bits_float(a) * 16777216.0f) * (1.0f / 16777216.0f);
  return bits_float(sign | float_bits(q));
}

KX_HOST_DEVICE inline float round_value(float x, Rounding r) {
  return r == Rounding::BFloat16 ? round_bfloat16(x) : r == Rounding::Float16 ? round_float16(x) : x;
}

}  // namespace kx::backend
