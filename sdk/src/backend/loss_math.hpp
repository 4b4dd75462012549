// The formulas of the losses, per element, and their constants: one definition that the CPU backend and
// the CUDA kernels both compile, so that they compute the same function. Not the same bits: exp and log
// are each platform's own to the last ulp, and how the elements of a sample are summed (one thread in
// order, or a warp) stays with each backend. The tests hold the two within a bound.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/host_device.hpp"

namespace kx::backend {

// Keras's backend epsilon: probabilities are clipped to [eps, 1 - eps] before their log.
inline constexpr double kProbEpsilon = 1e-7;

// p clipped to [kProbEpsilon, 1 - kProbEpsilon]; a NaN stays NaN.
KX_HOST_DEVICE inline double clip_probability(double p) {
  return p < kProbEpsilon ? kProbEpsilon : (1 - kProbEpsilon < p ? 1 - kProbEpsilon : p);
}
// Whether the clip changes p: the gradient through it is zero there.
KX_HOST_DEVICE inline bool probability_clipped(double p) { return p < kProbEpsilon || p > 1 - kProbEpsilon; }

// The logistic function, without overflow on either side (also the Sigmoid activation).
KX_HOST_DEVICE inline float sigmoid(float x) {
  return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
}
// log(1 + exp(x)) without overflow.
KX_HOST_DEVICE inline double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

// ---- Categorical cross-entropy, -sum_j t_j log p_j, of one sample over its classes j ----

// The target of class j: the one-hot of `label` for sparse labels, else t[j].
KX_HOST_DEVICE inline double class_target(const float* t, bool sparse, int64_t label, int64_t j) {
  return sparse ? (j == label ? 1.0 : 0.0) : t[j];
}
// From logits o, with lse = log(sum_k exp(o_k)): the term t_j log softmax(o)_j, subtracted from the loss.
KX_HOST_DEVICE inline double softmax_log_likelihood(double t, float o, double lse) { return t * (o - lse); }
// Its gradient d(scale * loss)/d(o_j) = scale * (softmax(o)_j * sum(t) - t_j).
KX_HOST_DEVICE inline float softmax_cross_entropy_grad(float scale, float o, double lse, double t_sum, double t) {
  return static_cast<float>(scale * (exp(o - lse) * t_sum - t));
}
// From probabilities o normalised by their sum s, p = o_j / s: the term t_j log clip(p), subtracted.
KX_HOST_DEVICE inline double probability_log_likelihood(double t, double p) { return t * log(clip_probability(p)); }
// Its gradient d(scale * loss)/d(o_j) = scale * (-t_j / o_j + sum(t) / s), the first part zero where
// clipped.
KX_HOST_DEVICE inline float probability_cross_entropy_grad(float scale, float o, double s, double t_sum, double t) {
  const double p = o / s;
  return static_cast<float>(scale * ((probability_clipped(p) ? 0.0 : -t / o) + t_sum / s));
}

// ---- Binary cross-entropy of one output x with target t (the sample's loss is the mean over cols) ----

// From a logit: softplus(x) - t x = -t log sigmoid(x) - (1 - t) log(1 - sigmoid(x)).
KX_HOST_DEVICE inline double binary_logit_loss(double x, double t) { return softplus(x) - t * x; }
// d(scale * loss / cols)/dx.
KX_HOST_DEVICE inline float binary_logit_grad(float scale, float x, double t, int64_t cols) {
  return static_cast<float>(scale * (sigmoid(x) - t) / cols);
}
// From a probability: t log p + (1 - t) log(1 - p) with p = clip(x), subtracted from the loss.
KX_HOST_DEVICE inline double binary_log_likelihood(double x, double t) {
  const double p = clip_probability(x);
  return t * log(p) + (1 - t) * log(1 - p);
}
// d(scale * loss / cols)/dx, zero where clipped.
KX_HOST_DEVICE inline float binary_probability_grad(float scale, double x, double t, int64_t cols) {
  const double p = clip_probability(x);
  return probability_clipped(x) ? 0.0f : static_cast<float>(scale * (-t / p + (1 - t) / (1 - p)) / cols);
}

// ---- Mean squared error, of the difference e = output - target (the mean over cols) ----

// d(scale * e^2 / cols)/de.
KX_HOST_DEVICE inline float squared_error_grad(float scale, double e, int64_t cols) {
  return static_cast<float>(scale * 2.0 * e / cols);
}

// ---- Mean absolute error, |e| of e = output - target (the mean over cols) ----
// d(scale * |e| / cols)/de: TensorFlow's sign, 0 at 0.
KX_HOST_DEVICE inline float absolute_error_grad(float scale, double e, int64_t cols) {
  return static_cast<float>(scale * (e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0)) / cols);
}

// ---- Huber, of e = output - target (the mean over cols), Keras's: quadratic within delta ----
KX_HOST_DEVICE inline double huber_loss(double e, double delta) {
  const double a = e < 0 ? -e : e;
  return a <= delta ? 0.5 * e * e : delta * a - 0.5 * delta * delta;
}
// d(scale * huber(e) / cols)/de.
KX_HOST_DEVICE inline float huber_grad(float scale, double e, double delta, int64_t cols) {
  const double g = e > delta ? delta : (e < -delta ? -delta : e);
  return static_cast<float>(scale * g / cols);
}

// ---- Accuracy ----

// Binary accuracy thresholds logits at 0 and probabilities at 0.5: the same decision.
KX_HOST_DEVICE inline float binary_threshold(bool logits) { return logits ? 0.0f : 0.5f; }
// 1 when output o and target t fall on the same side.
KX_HOST_DEVICE inline double binary_hit(float o, float t, float threshold) {
  return ((o > threshold) == (t > 0.5f)) ? 1.0 : 0.0;
}

}  // namespace kx::backend
