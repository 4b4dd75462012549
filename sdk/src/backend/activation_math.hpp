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

}  // namespace kx::backend
