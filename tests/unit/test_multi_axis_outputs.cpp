// Models whose output has more than one axis per sample ([H, W, C]): Keras applies softmax, the
// categorical losses and accuracies over the last axis at every position and averages over positions.
// predict, the loss, its gradient (one SGD step) and the accuracy against a float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

constexpr int64_t kN = 4, kH = 2, kW = 3, kF = 4, kC = 3;
constexpr int64_t kPositions = kH * kW;
constexpr double kClip = 1e-7;

struct HeadCase {
  Activation conv_act;        // the Conv2D's own activation
  Activation separate_act;    // an Activation layer after it (None: no such layer)
  LossKind loss;
  bool from_logits;
  int64_t classes;            // the last axis
  const char* name;
};

void PrintTo(const HeadCase& c, std::ostream* os) { *os << c.name; }

Activation head_activation(const HeadCase& c) {
  return c.separate_act != Activation::None ? c.separate_act : c.conv_act;
}

bool sparse(const HeadCase& c) { return c.loss == LossKind::SparseCategoricalCrossentropy; }

// A Conv2D 1x1 over [kH, kW, kF] samples: a Dense of `classes` units at every position.
Model head_model(const HeadCase& c, const Strategy& strategy = Strategy::default_strategy()) {
  Model m = Model::sequential(strategy, {kH, kW, kF});
  m.add_conv2d(c.classes, 1, 1, 1, Padding::Valid, c.conv_act);
  if (c.separate_act != Activation::None) {
    LayerSpec act;
    act.kind = LayerKind::Activation;
    act.activation = c.separate_act;
    m.add(act);
  }
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = 1.0;
  co.loss = {c.loss, c.from_logits};
  co.accuracy = true;
  co.seed = 7;
  m.compile(co);
  return m;
}

// Labels: one class per position (sparse), else a target row of `classes` per position.
std::vector<float> labels_for(const HeadCase& c, uint32_t seed) {
  std::mt19937 gen(seed);
  const int64_t per_position = sparse(c) ? 1 : c.classes;
  std::vector<float> y(static_cast<size_t>(kN * kPositions * per_position));
  for (int64_t p = 0; p < kN * kPositions; ++p) {
    const int64_t label = static_cast<int64_t>(gen() % static_cast<uint32_t>(c.classes));
    for (int64_t j = 0; j < per_position; ++j) {
      float& t = y[static_cast<size_t>(p * per_position + j)];
      if (sparse(c))
        t = static_cast<float>(label);
      else if (c.loss == LossKind::MeanSquaredError && c.classes > 1)
        t = static_cast<float>(gen() % 100) / 50.0f - 1.0f;
      else if (c.loss == LossKind::BinaryCrossentropy || c.loss == LossKind::MeanSquaredError)
        t = static_cast<float>(gen() % 2);  // 0/1: binary accuracy compares with them
      else
        t = j == label ? 1.0f : 0.0f;
    }
  }
  return y;
}

void apply(Activation act, double* v, int64_t n) {
  switch (act) {
    case Activation::Sigmoid:
      for (int64_t j = 0; j < n; ++j) v[j] = 1 / (1 + std::exp(-v[j]));
      return;
    case Activation::Softmax: {
      const double mx = *std::max_element(v, v + n);
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += (v[j] = std::exp(v[j] - mx));
      for (int64_t j = 0; j < n; ++j) v[j] /= s;
      return;
    }
    default: return;
  }
}

// The model's output in float64: the 1x1 convolution (kernel [F, C] then bias) and the activation
// over the last axis of each position.
Vec reference_output(const HeadCase& c, const std::vector<float>& x, const Vec& w) {
  const int64_t C = c.classes;
  Vec o(static_cast<size_t>(kN * kPositions * C));
  for (int64_t p = 0; p < kN * kPositions; ++p) {
    double* row = &o[static_cast<size_t>(p * C)];
    for (int64_t k = 0; k < C; ++k) {
      double z = w[static_cast<size_t>(kF * C + k)];
      for (int64_t f = 0; f < kF; ++f) z += x[static_cast<size_t>(p * kF + f)] * w[static_cast<size_t>(f * C + k)];
      row[k] = z;
    }
    apply(c.conv_act, row, C);
    apply(c.separate_act, row, C);
  }
  return o;
}

size_t argmax(const double* v, int64_t n) { return static_cast<size_t>(std::max_element(v, v + n) - v); }

// Keras's loss (the mean over samples and positions) and accuracy of outputs o.
struct LossAndAccuracy {
  double loss, accuracy;
};
LossAndAccuracy reference_loss(const HeadCase& c, const Vec& o, const std::vector<float>& y) {
  const int64_t C = c.classes, per_position = sparse(c) ? 1 : C;
  double loss = 0, correct = 0;
  for (int64_t p = 0; p < kN * kPositions; ++p) {
    const double* out = &o[static_cast<size_t>(p * C)];
    const float* t = &y[static_cast<size_t>(p * per_position)];
    Vec target(static_cast<size_t>(C));
    for (int64_t j = 0; j < C; ++j) target[j] = sparse(c) ? (j == static_cast<int64_t>(t[0]) ? 1.0 : 0.0) : t[j];
    switch (c.loss) {
      case LossKind::SparseCategoricalCrossentropy:
      case LossKind::CategoricalCrossentropy: {
        Vec prob(out, out + C);
        if (c.from_logits) {
          apply(Activation::Softmax, prob.data(), C);
        } else if (head_activation(c) != Activation::Softmax) {  // probabilities, normalised and clipped
          double s = 0;
          for (double v : prob) s += v;
          for (double& v : prob) v = std::clamp(v / s, kClip, 1 - kClip);
        }
        for (int64_t j = 0; j < C; ++j) loss -= target[j] * std::log(prob[j]);
        correct += argmax(out, C) == argmax(target.data(), C);
        break;
      }
      case LossKind::BinaryCrossentropy: {
        double hits = 0;
        for (int64_t j = 0; j < C; ++j) {
          const double q = c.from_logits ? 1 / (1 + std::exp(-out[j])) : out[j];
          loss -= (target[j] * std::log(q) + (1 - target[j]) * std::log(1 - q)) / C;
          hits += (q > 0.5) == (target[j] > 0.5);
        }
        correct += hits / C;
        break;
      }
      case LossKind::MeanSquaredError:
      case LossKind::MeanAbsoluteError:
      case LossKind::Huber: {  // Huber with Keras's delta 1
        for (int64_t j = 0; j < C; ++j) {
          const double e = std::fabs(out[j] - target[j]);
          loss += (c.loss == LossKind::MeanSquaredError    ? e * e
                   : c.loss == LossKind::MeanAbsoluteError ? e
                   : e <= 1                                 ? 0.5 * e * e
                                                            : e - 0.5) /
                  C;
        }
        if (C == 1)
          correct += (out[0] > 0.5) == (target[0] > 0.5);
        else
          correct += argmax(out, C) == argmax(target.data(), C);
        break;
      }
    }
  }
  const double positions = static_cast<double>(kN * kPositions);
  return {loss / positions, correct / positions};
}

class MultiAxisOutput : public ::testing::TestWithParam<HeadCase> {};

TEST_P(MultiAxisOutput, PredictLossGradientAndAccuracyFollowKerasOverTheLastAxis) {
  const HeadCase c = GetParam();
  Model m = head_model(c);
  const std::vector<float> x = test::random_floats(static_cast<size_t>(kN * kPositions * kF), 31, -2.0f, 2.0f);
  const std::vector<float> y = labels_for(c, 32);
  const std::vector<float> w0 = m.get_weights();
  const Vec w0d(w0.begin(), w0.end());
  const Vec want = reference_output(c, x, w0d);

  // predict gives the activation's output (a softmax folded into the loss is applied over the last axis).
  const std::vector<float> got = m.predict(x.data(), kN);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(test::first_mismatch(got, want, want.size(), 1e-5), -1) << c.name;

  const LossAndAccuracy ref = reference_loss(c, want, y);
  const EvalResult e = m.test_on_batch(x.data(), y.data(), kN);
  EXPECT_NEAR(e.loss, ref.loss, 1e-5 * std::max(1.0, ref.loss)) << c.name;
  EXPECT_NEAR(e.accuracy, ref.accuracy, 1e-9) << c.name;

  // One SGD step at rate 1 moves the weights by -gradient; train_on_batch reports the loss before it.
  const EvalResult t = m.train_on_batch(x.data(), y.data(), kN);
  EXPECT_NEAR(t.loss, ref.loss, 1e-5 * std::max(1.0, ref.loss)) << c.name;
  EXPECT_NEAR(t.accuracy, ref.accuracy, 1e-9) << c.name;
  const std::vector<float> w1 = m.get_weights();
  const Vec g = test::numeric_gradient([&](const Vec& w) { return reference_loss(c, reference_output(c, x, w), y).loss; }, w0d);
  Vec step(w0.size());
  for (size_t i = 0; i < w0.size(); ++i) step[i] = static_cast<double>(w0[i]) - w1[i];
  EXPECT_EQ(test::first_mismatch(step, g, g.size(), 2e-4), -1) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Heads, MultiAxisOutput,
    ::testing::Values(
        HeadCase{Activation::Softmax, Activation::None, LossKind::SparseCategoricalCrossentropy, false, kC, "softmax_sparse"},
        HeadCase{Activation::Softmax, Activation::None, LossKind::CategoricalCrossentropy, false, kC, "softmax_categorical"},
        HeadCase{Activation::None, Activation::Softmax, LossKind::SparseCategoricalCrossentropy, false, kC,
                 "activation_layer_softmax_sparse"},
        HeadCase{Activation::None, Activation::None, LossKind::SparseCategoricalCrossentropy, true, kC, "logits_sparse"},
        HeadCase{Activation::None, Activation::None, LossKind::CategoricalCrossentropy, true, kC, "logits_categorical"},
        HeadCase{Activation::Sigmoid, Activation::None, LossKind::CategoricalCrossentropy, false, kC,
                 "probabilities_categorical"},
        HeadCase{Activation::Sigmoid, Activation::None, LossKind::BinaryCrossentropy, false, kC, "sigmoid_binary"},
        HeadCase{Activation::None, Activation::None, LossKind::BinaryCrossentropy, true, kC, "logits_binary"},
        HeadCase{Activation::Softmax, Activation::None, LossKind::MeanSquaredError, false, kC, "softmax_mse"},
        HeadCase{Activation::None, Activation::None, LossKind::MeanSquaredError, false, 1, "one_channel_mse"}),
    [](const auto& info) { return std::string(info.param.name); });

const HeadCase kSparseSoftmax{Activation::Softmax, Activation::None, LossKind::SparseCategoricalCrossentropy, false,
                              kC, "sparse"};

// A dataset with labels of shape [N, H, W] or [N, H, W, 1] (Keras takes both) evaluates as the arrays do,
// and two replicas as one.
TEST(MultiAxisOutputData, PerPositionSparseLabelsInADatasetOnEveryReplicaCount) {
  const std::vector<float> x = test::random_floats(static_cast<size_t>(kN * kPositions * kF), 41, -2.0f, 2.0f);
  const std::vector<float> y = labels_for(kSparseSoftmax, 42);
  Model one = head_model(kSparseSoftmax);
  const EvalResult want = one.test_on_batch(x.data(), y.data(), kN);
  for (const Shape& y_shape : {Shape{kN, kH, kW}, Shape{kN, kH, kW, 1}}) {
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kN, kH, kW, kF}, y.data(), DType::F32, y_shape);
    d.batch(3, false);
    const EvalResult e = one.evaluate(d);
    EXPECT_NEAR(e.loss, want.loss, 1e-6);
    EXPECT_NEAR(e.accuracy, want.accuracy, 1e-12);
  }
  Model two = head_model(kSparseSoftmax, Strategy::mirrored({"cpu", "cpu"}));
  const EvalResult e2 = two.test_on_batch(x.data(), y.data(), kN);
  EXPECT_NEAR(e2.loss, want.loss, 1e-6);
  EXPECT_NEAR(e2.accuracy, want.accuracy, 1e-12);
}

TEST(MultiAxisOutputData, LabelsThatDoNotFitThePositionsAreRefused) {
  const std::vector<float> x = test::random_floats(static_cast<size_t>(kN * kPositions * kF), 43);
  Model m = head_model(kSparseSoftmax);
  // One label per sample is not one per position.
  const std::vector<float> per_sample(static_cast<size_t>(kN), 0.0f);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kN, kH, kW, kF}, per_sample.data(), DType::F32, {kN});
  EXPECT_EQ(test::status_of([&] { m.evaluate(d); }), Status::InvalidArgument);
  // A class beyond the last axis (a valid index into the whole sample) is not a class.
  std::vector<float> y = labels_for(kSparseSoftmax, 44);
  y[5] = static_cast<float>(kC);
  EXPECT_EQ(test::status_of([&] { m.test_on_batch(x.data(), y.data(), kN); }), Status::InvalidArgument);
  // Sparse cross-entropy needs two classes on the last axis, however many outputs a sample has.
  HeadCase one_class = kSparseSoftmax;
  one_class.classes = 1;
  EXPECT_EQ(test::status_of([&] { head_model(one_class); }), Status::InvalidArgument);
}

}  // namespace
}  // namespace kx
