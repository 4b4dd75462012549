// Losses and accuracy: values against float64 references, gradients against finite differences.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;
constexpr double kEps = 1e-7;
constexpr double kHuberDelta = 0.7;  // not Keras's default 1, so that the setting is seen

// Float64 reference of one sample's loss, as Keras defines it.
double ref_loss(LossKind kind, bool logits, const Vec& o, const Vec& t) {
  const size_t n = o.size();
  switch (kind) {
    case LossKind::SparseCategoricalCrossentropy:
    case LossKind::CategoricalCrossentropy: {
      Vec target(n, 0.0);
      if (kind == LossKind::SparseCategoricalCrossentropy)
        target[static_cast<size_t>(t[0])] = 1.0;
      else
        target = t;
      Vec p(n);
      if (logits) {
        double mx = *std::max_element(o.begin(), o.end()), s = 0;
        for (size_t j = 0; j < n; ++j) s += std::exp(o[j] - mx);
        for (size_t j = 0; j < n; ++j) p[j] = std::exp(o[j] - mx) / s;
      } else {
        double s = 0;
        for (double v : o) s += v;
        for (size_t j = 0; j < n; ++j) p[j] = std::clamp(o[j] / s, kEps, 1 - kEps);
      }
      double l = 0;
      for (size_t j = 0; j < n; ++j) l -= target[j] * std::log(p[j]);
      return l;
    }
    case LossKind::BinaryCrossentropy: {
      double l = 0;
      for (size_t j = 0; j < n; ++j) {
        const double p = logits ? 1 / (1 + std::exp(-o[j])) : std::clamp(o[j], kEps, 1 - kEps);
        l -= t[j] * std::log(p) + (1 - t[j]) * std::log(1 - p);
      }
      return l / n;
    }
    case LossKind::MeanSquaredError: {
      double l = 0;
      for (size_t j = 0; j < n; ++j) l += (o[j] - t[j]) * (o[j] - t[j]);
      return l / n;
    }
    case LossKind::MeanAbsoluteError: {
      double l = 0;
      for (size_t j = 0; j < n; ++j) l += std::fabs(o[j] - t[j]);
      return l / n;
    }
    case LossKind::Huber: {  // keras.losses.huber
      double l = 0;
      for (size_t j = 0; j < n; ++j) {
        const double e = std::fabs(o[j] - t[j]);
        l += e <= kHuberDelta ? 0.5 * e * e : kHuberDelta * e - 0.5 * kHuberDelta * kHuberDelta;
      }
      return l / n;
    }
  }
  return 0;
}

struct LossCase {
  LossKind kind;
  bool logits;
  const char* name;
};

class LossTest : public ::testing::TestWithParam<LossCase> {};

TEST_P(LossTest, ValueMatchesFloat64AndGradientMatchesFiniteDifferences) {
  const auto [kind, logits, name] = GetParam();
  const int64_t rows = 6, cols = 5;
  const bool sparse = kind == LossKind::SparseCategoricalCrossentropy;
  const int64_t y_cols = sparse ? 1 : cols;
  // Outputs: logits anywhere; probabilities in (0.05, 0.95) away from the clipping region.
  std::vector<float> out = test::random_floats(rows * cols, 21, logits ? -3.0f : 0.05f, logits ? 3.0f : 0.95f);
  std::vector<float> y(rows * y_cols);
  std::mt19937 gen(22);
  for (int64_t r = 0; r < rows; ++r) {
    if (sparse) {
      y[r] = static_cast<float>(gen() % cols);
    } else if (kind == LossKind::CategoricalCrossentropy) {
      for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = (j == static_cast<int64_t>(gen() % cols)) ? 1.0f : 0.0f;
      y[r * cols + r % cols] = 1.0f;
    } else if (kind == LossKind::BinaryCrossentropy) {
      for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = static_cast<float>(gen() % 2);
    } else {
      for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = static_cast<float>(gen() % 100) / 50.0f - 1.0f;
    }
  }
  backend::LossSpec spec{kind, logits, AccuracyKind::SparseCategorical};
  spec.huber_delta = static_cast<float>(kHuberDelta);
  spec.accuracy = sparse ? AccuracyKind::SparseCategorical
                         : (kind == LossKind::BinaryCrossentropy ? AccuracyKind::Binary : AccuracyKind::Categorical);
  auto be = backend::make_cpu_backend(1);
  // Unweighted, then with Keras's sample weights (one of them zero).
  for (bool weighted : {false, true}) {
    SCOPED_TRACE(weighted ? "weighted" : "unweighted");
    const std::vector<float> w = {0.5f, 2.0f, 0.0f, 1.0f, 3.25f, 0.75f};
    auto weight = [&](int64_t r) { return weighted ? static_cast<double>(w[r]) : 1.0; };
    std::vector<float> d(out.size());
    const float scale = 1.0f / rows;
    be->loss(spec, rows, cols, out.data(), y.data(), y_cols, weighted ? w.data() : nullptr, scale, d.data());
    const backend::LossSums sums = be->take_loss_sums();

    // Keras: the batch's loss is sum(w * loss) (over the batch size), its gradient that of the sum.
    auto batch_loss = [&](const Vec& o) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r)
        s += weight(r) * ref_loss(kind, logits, Vec(o.begin() + r * cols, o.begin() + (r + 1) * cols),
                                  Vec(y.begin() + r * y_cols, y.begin() + (r + 1) * y_cols));
      return s;
    };
    const Vec od(out.begin(), out.end());
    EXPECT_NEAR(sums.loss, batch_loss(od), 1e-9 * rows + 1e-6 * std::fabs(batch_loss(od)));
    Vec g = test::numeric_gradient([&](const Vec& o) { return batch_loss(o) / rows; }, od);
    EXPECT_EQ(test::first_mismatch(d, g, g.size(), 1e-5), -1) << name;

    // Accuracy, counted by hand: the weighted sum of the hits, and the weights' sum.
    double correct = 0, weights = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* o = out.data() + r * cols;
      const int64_t arg = std::max_element(o, o + cols) - o;
      double hit = 0;
      if (spec.accuracy == AccuracyKind::SparseCategorical) {
        hit = arg == static_cast<int64_t>(y[r]);
      } else if (spec.accuracy == AccuracyKind::Categorical) {
        const float* t = y.data() + r * cols;
        hit = arg == std::max_element(t, t + cols) - t;
      } else {
        double hits = 0;
        for (int64_t j = 0; j < cols; ++j) hits += ((o[j] > (logits ? 0.0f : 0.5f)) == (y[r * cols + j] > 0.5f));
        hit = hits / cols;
      }
      correct += weight(r) * hit;
      weights += weight(r);
    }
    EXPECT_DOUBLE_EQ(sums.correct, correct);
    EXPECT_DOUBLE_EQ(sums.weight, weights);
    if (weighted) {  // a zero weight: no gradient at all for that sample
      for (int64_t j = 0; j < cols; ++j) EXPECT_EQ(d[2 * cols + j], 0.0f);
    }
  }
}

TEST(Loss, AccuracyOfZeroTotalWeightIsZeroAsKeras) {
  backend::LossSums s;
  s.correct = 0;
  s.weight = 0;
  EXPECT_EQ(s.accuracy(), 0.0);
  s.correct = 1.5, s.weight = 2.0;
  EXPECT_EQ(s.accuracy(), 0.75);
}

INSTANTIATE_TEST_SUITE_P(
    Losses, LossTest,
    ::testing::Values(LossCase{LossKind::SparseCategoricalCrossentropy, true, "sparse_logits"},
                      LossCase{LossKind::SparseCategoricalCrossentropy, false, "sparse_probabilities"},
                      LossCase{LossKind::CategoricalCrossentropy, true, "categorical_logits"},
                      LossCase{LossKind::CategoricalCrossentropy, false, "categorical_probabilities"},
                      LossCase{LossKind::BinaryCrossentropy, true, "binary_logits"},
                      LossCase{LossKind::BinaryCrossentropy, false, "binary_probabilities"},
                      LossCase{LossKind::MeanSquaredError, false, "mse"},
                      LossCase{LossKind::MeanAbsoluteError, false, "mae"},
                      LossCase{LossKind::Huber, false, "huber"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Loss, LogitsPathIsStableForHugeLogits) {
  auto be = backend::make_cpu_backend(1);
  const std::vector<float> out = {1000.0f, -1000.0f, 0.0f};
  const std::vector<float> y = {1.0f};
  std::vector<float> d(3);
  be->loss({LossKind::SparseCategoricalCrossentropy, true, AccuracyKind::SparseCategorical}, 1, 3, out.data(),
           y.data(), 1, nullptr, 1.0f, d.data());
  const backend::LossSums sums = be->take_loss_sums();
  EXPECT_NEAR(sums.loss, 2000.0, 1e-6);
  for (float v : d) EXPECT_TRUE(std::isfinite(v));
}

TEST(Accuracy, ChosenAsKerasChoosesIt) {
  EXPECT_EQ(choose_accuracy(LossKind::BinaryCrossentropy, 1, 1), AccuracyKind::Binary);
  EXPECT_EQ(choose_accuracy(LossKind::SparseCategoricalCrossentropy, 10, 1), AccuracyKind::SparseCategorical);
  EXPECT_EQ(choose_accuracy(LossKind::CategoricalCrossentropy, 10, 10), AccuracyKind::Categorical);
  EXPECT_EQ(choose_accuracy(LossKind::MeanSquaredError, 1, 1), AccuracyKind::Binary);
  EXPECT_EQ(choose_accuracy(LossKind::MeanSquaredError, 4, 4), AccuracyKind::Categorical);
}

}  // namespace
}  // namespace kx
