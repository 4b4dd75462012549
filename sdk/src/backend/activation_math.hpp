// Formulas of the activations that the CPU and the CUDA kernels share (KX_HOST_DEVICE), so that both
// compute them the same way:
// - NaN as Keras treats it: relu(NaN) is NaN (TensorFlow's Relu), where max(0, x) in the form fmaxf or a
//   vector max with 0 second would make it 0 and hide a NaN input from the loss and TerminateOnNaN.
// - The backward passes rounded operation by operation (rounded_math.hpp), so both devices give the same
//   bits from the same y and dy. Near |y| = 1, tanh's 1 - y*y cancels: a fused multiply-add there
//   differs from the rounded product in the leading digits of the result.
// The forward tanh and exp are each platform's own (glibc and CUDA differ by an ulp or two).
#pragma once

#include "backend/host_device.hpp"
#include "backend/rounded_math.hpp"

namespace kx::backend {

KX_HOST_DEVICE inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

KX_HOST_DEVICE inline float relu_backward(float y, float dy) { return y > 0.0f ? dy : 0.0f; }
// dy * y * (1 - y), left to right.
KX_HOST_DEVICE inline float sigmoid_backward(float y, float dy) { return mul_rn(mul_rn(dy, y), sub_rn(1.0f, y)); }
// dy * (1 - y * y).
KX_HOST_DEVICE inline float tanh_backward(float y, float dy) { return mul_rn(dy, sub_rn(1.0f, mul_rn(y, y))); }

// A relu_general max_value above it means no clip (Keras's max_value None, passed as +infinity).
inline constexpr float kReluNoClip = 3.0e38f;

// Keras 3's relu(x, negative_slope, max_value, threshold) (keras.activations.relu on TensorFlow), step
// by step as it computes it; max_value +infinity stands for None. Its branches differ on NaN as
// TensorFlow's do: the threshold's where() gives 0, relu, relu6 and clip keep the NaN.
KX_HOST_DEVICE inline float relu_general(float x, float slope, float max_value, float threshold) {
  const bool clip = max_value <= kReluNoClip;
  if (slope != 0.0f && !clip && threshold == 0.0f) return x > 0.0f ? x : mul_rn(x, slope);  // leaky_relu
  float y;
  if (threshold != 0.0f) {
    y = x > threshold ? x : 0.0f;
  } else {
    y = relu(x);  // relu6 when max_value is 6: the same as relu then clip
  }
  if (clip && y > max_value) y = max_value;
  if (slope != 0.0f) y = sub_rn(y, mul_rn(slope, relu(threshold != 0.0f ? add_rn(-x, threshold) : -x)));
  return y;
}

// dy times relu_general's derivative at x, as TensorFlow differentiates its steps: the where() and
// relu pass dy above the threshold (above 0), relu6 strictly inside (0, 6), clip up to max_value
// inclusive; the negative part adds dy * slope below the threshold.
KX_HOST_DEVICE inline float relu_general_backward(float x, float dy, float slope, float max_value, float threshold) {
  const bool clip = max_value <= kReluNoClip;
  if (slope != 0.0f && !clip && threshold == 0.0f) return x > 0.0f ? dy : mul_rn(dy, slope);
  bool pass;
  if (threshold != 0.0f) {
    pass = x > threshold && !(clip && x > max_value);
  } else if (max_value == 6.0f) {
    pass = x > 0.0f && x < 6.0f;
  } else {
    pass = x > 0.0f && !(clip && x > max_value);
  }
  const float g = pass ? dy : 0.0f;
  if (slope == 0.0f) return g;
  const bool below = (threshold != 0.0f ? add_rn(-x, threshold) : -x) > 0.0f;
  return below ? add_rn(g, mul_rn(dy, slope)) : g;
}

}  // namespace kx::backend
