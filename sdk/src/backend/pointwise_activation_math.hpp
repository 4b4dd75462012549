// Element-wise activations computed from their input x, forward and backward, as TensorFlow (Keras 3's
// backend) computes them, shared by the CPU and the CUDA kernels (KX_HOST_DEVICE). Each formula is
// TensorFlow's own expression: silu's custom gradient, hard_sigmoid as relu6(x + 3) / 6 and its
// gradient through the relu6 and the division, gelu's erfc form, elu as exp(x) - 1 with its gradient
// from the output, softplus with Eigen's thresholds. exp, erfc, tanh and log1p are each platform's own.
#pragma once

#include <math.h>

#include "backend/activation_math.hpp"
#include "backend/host_device.hpp"
#include "backend/loss_math.hpp"
#include "backend/rounded_math.hpp"
#include "kx/layer.hpp"

namespace kx::backend {

// The activations whose gradient a layer computes from the activation's input: every one after
// softmax. Those before it take theirs from the output (activation_backward).
KX_HOST_DEVICE constexpr bool activation_grad_reads_input(Activation a) {
  return static_cast<int>(a) > static_cast<int>(Activation::Softmax);
}

namespace pointwise {

inline constexpr float kLeakySlope = 0.2f;            // Keras's leaky_relu default
inline constexpr float kInvSqrt2 = 0.7071067811865476f;
inline constexpr float kInvSqrt2Pi = 0.3989422804014327f;
inline constexpr float kGeluTanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluTanhCubic = 0.044715f;
// Eigen's softplus switches to x above -threshold and to exp(x) below threshold = log(FLT_EPSILON) + 2.
inline constexpr float kSoftplusThreshold = -13.942385f;

KX_HOST_DEVICE inline float relu6(float x) { return relu_general(x, 0.0f, 6.0f, 0.0f); }
KX_HOST_DEVICE inline float hard_sigmoid(float x) { return div_rn(relu6(add_rn(x, 3.0f)), 6.0f); }
// relu6's gradient passes strictly inside (0, 6) of x + 3, divided by 6 as the division's gradient is.
KX_HOST_DEVICE inline float hard_sigmoid_grad(float x, float dy) {
  const float t = add_rn(x, 3.0f);
  return t > 0.0f && t < 6.0f ? div_rn(dy, 6.0f) : 0.0f;
}
KX_HOST_DEVICE inline float gelu(float x) { return mul_rn(mul_rn(0.5f, x), erfcf(mul_rn(-x, kInvSqrt2))); }
KX_HOST_DEVICE inline float gelu_grad(float x, float dy) {
  const float cdf = mul_rn(0.5f, erfcf(mul_rn(-x, kInvSqrt2)));
  const float pdf = mul_rn(expf(mul_rn(mul_rn(-0.5f, x), x)), kInvSqrt2Pi);
  return mul_rn(dy, add_rn(cdf, mul_rn(x, pdf)));
}
KX_HOST_DEVICE inline float gelu_tanh_inner(float x) {
  return mul_rn(kGeluTanhScale, add_rn(x, mul_rn(kGeluTanhCubic, mul_rn(mul_rn(x, x), x))));
}
KX_HOST_DEVICE inline float gelu_tanh(float x) {
  return mul_rn(mul_rn(0.5f, x), add_rn(1.0f, tanhf(gelu_tanh_inner(x))));
}
// d/dx of 0.5 x (1 + t), t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
KX_HOST_DEVICE inline float gelu_tanh_grad(float x, float dy) {
  const float t = tanhf(gelu_tanh_inner(x));
  const float du = mul_rn(kGeluTanhScale, add_rn(1.0f, mul_rn(3.0f * kGeluTanhCubic, mul_rn(x, x))));
  const float g = add_rn(mul_rn(0.5f, add_rn(1.0f, t)), mul_rn(mul_rn(mul_rn(0.5f, x), sub_rn(1.0f, mul_rn(t, t))), du));
  return mul_rn(dy, g);
}
KX_HOST_DEVICE inline float elu(float x) { return x < 0.0f ? sub_rn(expf(x), 1.0f) : x; }
KX_HOST_DEVICE inline float softplus(float x) {
  if (x > -kSoftplusThreshold) return x;
  if (x < kSoftplusThreshold) return expf(x);
  return log1pf(expf(x));
}

}  // namespace pointwise

// act(x) for every activation but softmax (which is not element-wise: x comes back unchanged).
KX_HOST_DEVICE inline float pointwise_activation(Activation act, float x) {
  using namespace pointwise;
  switch (act) {
    case Activation::None:
    case Activation::Softmax: return x;
    case Activation::Relu: return relu(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Tanh: return tanhf(x);
    case Activation::Relu6: return relu6(x);
    case Activation::Silu: return mul_rn(x, sigmoid(x));
    case Activation::HardSilu: return mul_rn(x, hard_sigmoid(x));
    case Activation::HardSigmoid: return hard_sigmoid(x);
    case Activation::Gelu: return gelu(x);
    case Activation::GeluTanh: return gelu_tanh(x);
    case Activation::Elu: return elu(x);
    case Activation::LeakyRelu: return relu_general(x, kLeakySlope, INFINITY, 0.0f);
    case Activation::Softplus: return softplus(x);
  }
  return x;
}

// dy times act's derivative at x (softmax: dy unchanged, as it is not element-wise).
KX_HOST_DEVICE inline float pointwise_activation_backward(Activation act, float x, float dy) {
  using namespace pointwise;
  switch (act) {
    case Activation::None:
    case Activation::Softmax: return dy;
    case Activation::Relu: return x > 0.0f ? dy : 0.0f;
    case Activation::Sigmoid: return sigmoid_backward(sigmoid(x), dy);
    case Activation::Tanh: return tanh_backward(tanhf(x), dy);
    case Activation::Relu6: return relu_general_backward(x, dy, 0.0f, 6.0f, 0.0f);
    case Activation::Silu: {  // TensorFlow's: dy * s * (1 + x * (1 - s))
      const float s = sigmoid(x);
      return mul_rn(dy, mul_rn(s, add_rn(1.0f, mul_rn(x, sub_rn(1.0f, s)))));
    }
    case Activation::HardSilu:  // x * h(x): dy * h through x, then x * dy through h
      return add_rn(mul_rn(dy, hard_sigmoid(x)), hard_sigmoid_grad(x, mul_rn(x, dy)));
    case Activation::HardSigmoid: return hard_sigmoid_grad(x, dy);
    case Activation::Gelu: return gelu_grad(x, dy);
    case Activation::GeluTanh: return gelu_tanh_grad(x, dy);
    case Activation::Elu: {  // TensorFlow's EluGrad, from the output y: dy * (y + 1) where y < 0
      const float y = elu(x);
      return y < 0.0f ? mul_rn(add_rn(y, 1.0f), dy) : dy;
    }
    case Activation::LeakyRelu: return relu_general_backward(x, dy, kLeakySlope, INFINITY, 0.0f);
    case Activation::Softplus: return div_rn(dy, add_rn(expf(-x), 1.0f));
  }
  return dy;
}

}  // namespace kx::backend
