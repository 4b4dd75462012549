#include "backend/cpu/loss_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/loss_math.hpp"

namespace kx::backend::cpu {
namespace {

template <class T>
int argmax_row(const T* v, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j)
    if (v[j] > v[best]) best = j;
  return static_cast<int>(best);
}

double categorical_cross_entropy(const LossSpec& spec, int64_t cols, const float* o, const float* t, float scale,
                                 float* d) {
  const bool sparse = spec.kind == LossKind::SparseCategoricalCrossentropy;
  const int64_t label = sparse ? static_cast<int64_t>(t[0]) : -1;
  double loss = 0, t_sum = 0;
  if (spec.logits) {
    // Stable log-softmax.
    double mx = o[0];
    for (int64_t j = 1; j < cols; ++j) mx = std::max<double>(mx, o[j]);
    double se = 0;
    for (int64_t j = 0; j < cols; ++j) se += std::exp(o[j] - mx);
    const double lse = mx + std::log(se);
    for (int64_t j = 0; j < cols; ++j) {
      const double tj = class_target(t, sparse, label, j);
      loss -= softmax_log_likelihood(tj, o[j], lse);
      t_sum += tj;
    }
    if (d)
      for (int64_t j = 0; j < cols; ++j)
        d[j] = softmax_cross_entropy_grad(scale, o[j], lse, t_sum, class_target(t, sparse, label, j));
    return loss;
  }
  // Probabilities: normalised to sum 1 and clipped, as Keras does.
  double s = 0;
  for (int64_t j = 0; j < cols; ++j) s += o[j];
  for (int64_t j = 0; j < cols; ++j) {
    const double tj = class_target(t, sparse, label, j);
    t_sum += tj;
    loss -= probability_log_likelihood(tj, o[j] / s);
  }
  if (d)
    for (int64_t j = 0; j < cols; ++j)
      d[j] = probability_cross_entropy_grad(scale, o[j], s, t_sum, class_target(t, sparse, label, j));
  return loss;
}

// One sample's loss; writes d(loss * scale)/d(out) into d when d is not null.
double row_loss(const LossSpec& spec, int64_t cols, const float* o, const float* t, float scale, float* d) {
  switch (spec.kind) {
    case LossKind::SparseCategoricalCrossentropy:
    case LossKind::CategoricalCrossentropy:
      return categorical_cross_entropy(spec, cols, o, t, scale, d);
    case LossKind::BinaryCrossentropy: {
      double loss = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double tj = t[j], x = o[j];
        if (spec.logits) {
          loss += binary_logit_loss(x, tj);
          if (d) d[j] = binary_logit_grad(scale, o[j], tj, cols);
        } else {
          loss -= binary_log_likelihood(x, tj);
          if (d) d[j] = binary_probability_grad(scale, x, tj, cols);
        }
      }
      return loss / cols;  // Keras: mean over the last axis
    }
    case LossKind::MeanSquaredError: {
      double loss = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double e = static_cast<double>(o[j]) - t[j];
        loss += e * e;
        if (d) d[j] = squared_error_grad(scale, e, cols);
      }
      return loss / cols;
    }
    case LossKind::MeanAbsoluteError: {
      double loss = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double e = static_cast<double>(o[j]) - t[j];
        loss += std::fabs(e);
        if (d) d[j] = absolute_error_grad(scale, e, cols);
      }
      return loss / cols;
    }
    case LossKind::Huber: {
      double loss = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double e = static_cast<double>(o[j]) - t[j];
        loss += huber_loss(e, spec.huber_delta);
        if (d) d[j] = huber_grad(scale, e, spec.huber_delta, cols);
      }
      return loss / cols;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double row_correct(const LossSpec& spec, int64_t cols, const float* o, const float* t, int64_t y_cols) {
  switch (spec.accuracy) {
    case AccuracyKind::SparseCategorical:
      return argmax_row(o, cols) == static_cast<int64_t>(t[0]) ? 1.0 : 0.0;
    case AccuracyKind::Categorical:
      return argmax_row(o, cols) == argmax_row(t, y_cols) ? 1.0 : 0.0;
    case AccuracyKind::Binary: {
      const float threshold = binary_threshold(spec.logits);
      double hits = 0;
      for (int64_t j = 0; j < cols; ++j) hits += binary_hit(o[j], t[j], threshold);
      return hits / cols;
    }
  }
  return 0;
}

}  // namespace

LossSums loss_rows(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y, int64_t y_cols,
                   const float* weights, float grad_scale, float* dout) {
  LossSums sums;
  for (int64_t r = 0; r < rows; ++r) {
    const float* o = out + r * cols;
    const float* t = y + r * y_cols;
    // A sample weighs w in the loss, its gradient and the accuracy (Keras's sample_weight).
    const float w = weights ? weights[r / spec.positions] : 1.0f;
    sums.loss += w * row_loss(spec, cols, o, t, grad_scale * w, dout ? dout + r * cols : nullptr);
    sums.correct += w * row_correct(spec, cols, o, t, y_cols);
    sums.weight += w;
  }
  return sums;
}

}  // namespace kx::backend::cpu
