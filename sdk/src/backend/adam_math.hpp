// Adam as Keras 3 computes it, in float32: the constants the kernels take and the step's rate with the
// bias correction folded in. Beside the Adam kernels (cpu/optimizer_kernels.cpp, cuda/elementwise_kernels.cu)
// so that their rounding and the rate's are read in one place.
//
// Keras 3 (keras/src/optimizers/adam.py):
//   beta_1_power = cast(beta_1, float32) ** cast(t, float32)        -- in float32
//   alpha = lr * sqrt(1 - beta_2_power) / (1 - beta_1_power)        -- float32 operations, left to right
//   m += (g - m) * (1 - beta_1);  v += (g^2 - v) * (1 - beta_2)     -- (1 - beta) in Python's double,
//                                                                      then float32
//   p -= (m * alpha) / (sqrt(v) + epsilon)
#pragma once
#include <cmath>
#include <cstdint>

namespace kx::backend {

// (1 - beta) as Keras 3 rounds it: computed in double from the double beta, then float32. For beta2 =
// 0.999 that is 0.001f, where 1.0f - float(0.999) would be 0.00099998713.
inline float adam_one_minus(double beta) { return static_cast<float>(1.0 - beta); }

// float32(beta)^t, correctly rounded (the double power of the float32 value, then float32).
inline float adam_power(double beta, int64_t t) {
  return static_cast<float>(std::pow(static_cast<double>(static_cast<float>(beta)), static_cast<double>(t)));
}

// The rate of step t (1 for the first): lr * sqrt(1 - beta2^t) / (1 - beta1^t), each operation in float32.
inline float adam_rate(float lr, double beta1, double beta2, int64_t t) {
  const float one_minus_b2_power = 1.0f - adam_power(beta2, t);
  const float one_minus_b1_power = 1.0f - adam_power(beta1, t);
  return (lr * std::sqrt(one_minus_b2_power)) / one_minus_b1_power;
}

}  // namespace kx::backend
