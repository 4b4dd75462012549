// AdamW's and RMSprop's updates of one element as Keras 3 computes them in float32, for the CPU backend
// and the CUDA kernels alike (each operation rounded on its own: the same bits on both).
//
// Keras 3 (keras/src/optimizers/base_optimizer.py, rmsprop.py):
//   weight decay, before the update:  p -= p * weight_decay * lr       (lr the plain learning rate)
//   RMSprop:  v = rho * v + (1 - rho) * g^2
//             centered: a = rho * a + (1 - rho) * g;  denominator = v - a^2 + epsilon
//             else:     denominator = v + epsilon
//             increment = lr * g / sqrt(denominator)
//             momentum > 0: m = momentum * m + increment; p -= m     else p -= increment
//   (rho, 1 - rho, momentum and epsilon: Python doubles rounded to float32.)
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/host_device.hpp"
#include "backend/rounded_math.hpp"

namespace kx::backend {

// The constants as Keras 3 rounds them: rho, 1 - rho (in double) and the rest to float32.
inline RmsPropConstants rmsprop_constants(double rho, double momentum, double epsilon) {
  return {static_cast<float>(rho), static_cast<float>(1.0 - rho), static_cast<float>(momentum),
          static_cast<float>(epsilon)};
}

// p - p * weight_decay * lr, left to right.
KX_HOST_DEVICE inline float weight_decayed(float p, float weight_decay, float lr) {
  return sub_rn(p, mul_rn(mul_rn(p, weight_decay), lr));
}

// Keras 3's Adam step of one element (adam_math.hpp's constants), the moments updated in place.
KX_HOST_DEVICE inline float adam_step(float p, float g, float& m, float& v, float lr_t, float one_minus_beta1,
                                      float one_minus_beta2, float epsilon) {
  m = add_rn(m, mul_rn(one_minus_beta1, sub_rn(g, m)));
  v = add_rn(v, mul_rn(one_minus_beta2, sub_rn(mul_rn(g, g), v)));
  return sub_rn(p, div_rn(mul_rn(m, lr_t), add_rn(sqrt_rn(v), epsilon)));
}

// One element's RMSprop step: the new p; velocity v, momentum m (null without momentum) and average
// gradient a (null unless centered) updated in place.
KX_HOST_DEVICE inline float rmsprop_step(float p, float g, float& v, float* m, float* a, const RmsPropConstants& c,
                                         float lr) {
  v = add_rn(mul_rn(c.rho, v), mul_rn(c.one_minus_rho, mul_rn(g, g)));
  float denominator;
  if (a) {
    *a = add_rn(mul_rn(c.rho, *a), mul_rn(c.one_minus_rho, g));
    denominator = add_rn(sub_rn(v, mul_rn(*a, *a)), c.epsilon);
  } else {
    denominator = add_rn(v, c.epsilon);
  }
  const float increment = div_rn(mul_rn(lr, g), sqrt_rn(denominator));
  if (!m) return sub_rn(p, increment);
  *m = add_rn(mul_rn(c.momentum, *m), increment);
  return sub_rn(p, *m);
}

}  // namespace kx::backend
