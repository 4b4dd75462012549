// exp, the logistic function and tanh in float32 written without branches or library calls, so that a `#pragma omp simd` loop
// (a KX_CLONES or KX_CLONES_AVX2 function) runs it at full vector width, which libm's expf does not allow. Within about 2 ulp of
// the exact value over the whole float range: exp(x) = 2^n exp(r) with n = round(x / ln 2) and
// |r| <= ln(2) / 2, ln 2 split in two so r is exact, exp(r) by its Taylor polynomial to degree 7
// (truncation below 1e-8 relative), 2^n applied as two normal powers so results down to the
// subnormals and up to FLT_MAX stay right. NaN stays NaN; below -104 it is 0, above ln(FLT_MAX) inf.
// sigmoid and tanh build on it (the LSTM's gates).
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

namespace kx::backend::cpu {

inline float vector_exp(float x) {
  constexpr float kLowest = -104.0f, kHighest = 88.72283f;  // exp underflows to 0 / overflows beyond
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693145751953125f;  // few mantissa bits: n * kLn2High is exact
  constexpr float kLn2Low = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  // Comparisons false for NaN: a NaN passes through every step.
  const float c = x < kLowest ? kLowest : (x > kHighest ? kHighest : x);
  const float shifted = c * kLog2e + kRound;
  const float n = shifted - kRound;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  const float r = (c - n * kLn2High) - n * kLn2Low;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n1 = ni / 2, n2 = ni - n1;  // each in [-75, 64]: both powers are normal floats
  const float scaled = p * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
  return x < kLowest ? 0.0f : (x > kHighest ? std::numeric_limits<float>::infinity() : scaled);
}

// The logistic function as loss_math.hpp's sigmoid (no overflow on either side), on vector_exp.
inline float vector_sigmoid(float x) {
  const float e = vector_exp(x >= 0.0f ? -x : x);  // exp(-|x|); NaN stays NaN
  // One division for either sign (a division under a condition keeps a loop from vectorising).
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

// tanh: below |x| = 0.625 its Taylor series to x^19 (truncation below 1e-8 relative; no cancellation
// near 0), above it 1 - 2 / (exp(2|x|) + 1) (within a few ulp there), the sign put back.
inline float vector_tanh(float x) {
  const float a = x < 0.0f ? -x : x;
  const float x2 = x * x;
  float p = -2.3912911424355248e-04f;  // the series' coefficients, x^19 down to x^3
  p = p * x2 + 5.9002744094558598e-04f;
  p = p * x2 - 1.4558343870513183e-03f;
  p = p * x2 + 3.5921280365724810e-03f;
  p = p * x2 - 8.8632355299021966e-03f;
  p = p * x2 + 2.1869488536155203e-02f;
  p = p * x2 - 5.3968253968253968e-02f;
  p = p * x2 + 1.3333333333333333e-01f;
  p = p * x2 - 3.3333333333333333e-01f;
  const float series = x + x * (x2 * p);
  const float far = 1.0f - 2.0f / (vector_exp(2.0f * a) + 1.0f);
  return a < 0.625f ? series : (x < 0.0f ? -far : far);
}

}  // namespace kx::backend::cpu
