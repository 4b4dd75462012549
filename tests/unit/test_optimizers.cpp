// SGD (with momentum) and Adam against float64 re-implementations of Keras's update rules.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "kx/error.hpp"
#include "kx/optimizer.hpp"
#include "reference.hpp"

namespace kx {
namespace {

TEST(Optimizer, AdamMatchesKerasOverSeveralSteps) {
  const int64_t n = 40000;  // large enough for the parallel path
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  auto be = backend::make_cpu_backend(2);
  FloatBuffer p = test::to_buffer(test::random_floats(n, 31)), m(n, 0.0f), v(n, 0.0f);
  test::Vec pd(p.begin(), p.end()), md(n, 0.0), vd(n, 0.0);
  for (int t = 1; t <= 5; ++t) {
    FloatBuffer g = test::to_buffer(test::random_floats(n, 100 + t));
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    be->adam_update(n, p.data(), g.data(), m.data(), v.data(), static_cast<float>(lr_t), b1, b2, eps);
    for (int64_t i = 0; i < n; ++i) {
      md[i] = b1 * md[i] + (1 - b1) * g[i];
      vd[i] = b2 * vd[i] + (1 - b2) * g[i] * g[i];
      pd[i] -= lr_t * md[i] / (std::sqrt(vd[i]) + eps);
    }
  }
  EXPECT_EQ(test::first_mismatch(p, pd, n, 1e-6), -1);
  EXPECT_EQ(test::first_mismatch(m, md, n, 1e-6), -1);
}

TEST(Optimizer, SgdWithAndWithoutMomentumMatchesKeras) {
  const int64_t n = 1000;
  auto be = backend::make_cpu_backend(2);
  for (double momentum : {0.0, 0.9}) {
    FloatBuffer p = test::to_buffer(test::random_floats(n, 41)), vel(n, 0.0f);
    test::Vec pd(p.begin(), p.end()), vd(n, 0.0);
    for (int t = 0; t < 4; ++t) {
      FloatBuffer g = test::to_buffer(test::random_floats(n, 200 + t));
      be->sgd_update(n, p.data(), g.data(), vel.data(), 0.01f, static_cast<float>(momentum));
      for (int64_t i = 0; i < n; ++i) {
        if (momentum != 0) {
          vd[i] = momentum * vd[i] - 0.01 * static_cast<double>(g[i]);
          pd[i] += vd[i];
        } else {
          pd[i] -= 0.01 * static_cast<double>(g[i]);
        }
      }
    }
    EXPECT_EQ(test::first_mismatch(p, pd, n, 1e-6), -1) << "momentum " << momentum;
  }
}

TEST(Optimizer, DefaultsAreKeras) {
  OptimizerConfig adam;
  const OptimizerConfig a = adam.resolved();
  EXPECT_DOUBLE_EQ(a.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(a.beta1, 0.9);
  EXPECT_DOUBLE_EQ(a.beta2, 0.999);
  EXPECT_DOUBLE_EQ(a.epsilon, 1e-7);
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  EXPECT_DOUBLE_EQ(sgd.resolved().learning_rate, 1e-2);
  OptimizerConfig bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(bad.resolved(), Error);
  bad.beta1 = 0;
  bad.learning_rate = -1;
  EXPECT_THROW(bad.resolved(), Error);
  bad.learning_rate = NAN;
  EXPECT_THROW(bad.resolved(), Error);
}

}  // namespace
}  // namespace kx
