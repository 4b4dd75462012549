// Adam as Keras 3 computes it: a float32 reference written here from Keras 3's update_step, against
// kx's kernel with the rate the step runner uses, and against 50 steps of fit.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/adam_math.hpp"
#include "backend/backend.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

// keras/src/optimizers/adam.py, update_step, in float32 throughout (the TensorFlow backend's order).
struct KerasAdam {
  float lr, beta1, beta2, epsilon;  // float32 variables / casts, as Keras holds them
  float one_minus_beta1, one_minus_beta2;  // Python's (1 - beta) in double, cast when multiplied
  KerasAdam(double lr_, double b1, double b2, double eps)
      : lr(static_cast<float>(lr_)),
        beta1(static_cast<float>(b1)),
        beta2(static_cast<float>(b2)),
        epsilon(static_cast<float>(eps)),
        one_minus_beta1(static_cast<float>(1.0 - b1)),
        one_minus_beta2(static_cast<float>(1.0 - b2)) {}

  void step(int64_t t, std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m,
            std::vector<float>& v) const {
    const float local_step = static_cast<float>(t);
    // ops.power(float32, float32): correctly rounded here through double.
    const float b1_power = static_cast<float>(std::pow(static_cast<double>(beta1), static_cast<double>(local_step)));
    const float b2_power = static_cast<float>(std::pow(static_cast<double>(beta2), static_cast<double>(local_step)));
    const float alpha = lr * std::sqrt(1.0f - b2_power) / (1.0f - b1_power);
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = m[i] + (g[i] - m[i]) * one_minus_beta1;
      v[i] = v[i] + (g[i] * g[i] - v[i]) * one_minus_beta2;
      p[i] = p[i] - (m[i] * alpha) / (std::sqrt(v[i]) + epsilon);
    }
  }
};

// max |a - b| relative to max |b|: a difference against the weights' scale (a weight passing near zero
// is not held to its own tiny magnitude).
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

TEST(KerasNumerics, AdamKernelAndRateFollowKeras3For50Steps) {
  struct Case {
    double lr, b1, b2, eps;
  };
  for (const Case c : {Case{1e-3, 0.9, 0.999, 1e-7}, Case{0.01, 0.0, 0.999, 1e-7}, Case{3e-4, 0.5, 0.9, 0.0}}) {
    const int64_t n = 4096;
    auto be = backend::make_cpu_backend(2);
    std::vector<float> p = test::random_floats(n, 7), m(n, 0.0f), v(n, 0.0f);
    std::vector<float> pk = p, mk = m, vk = v;
    const KerasAdam keras(c.lr, c.b1, c.b2, c.eps);
    for (int64_t t = 1; t <= 50; ++t) {
      std::vector<float> g = test::random_floats(n, static_cast<uint32_t>(1000 + t));
      // A quarter of the weights see no gradient until step 30: the case where a rounding of the
      // constants turns into a step of the wrong size when their gradient arrives.
      for (int64_t i = 0; i < n / 4; ++i)
        if (t < 30) g[static_cast<size_t>(i)] = 0;
      const float rate = backend::adam_rate(static_cast<float>(c.lr), c.b1, c.b2, t);
      be->adam_update(n, p.data(), g.data(), m.data(), v.data(), &rate, backend::adam_one_minus(c.b1),
                      backend::adam_one_minus(c.b2), static_cast<float>(c.eps), nullptr);
      keras.step(t, pk, g, mk, vk);
    }
    EXPECT_LE(relative_difference(p, pk), 1e-6) << "beta1 " << c.b1;
    EXPECT_LE(relative_difference(v, vk), 1e-6) << "beta1 " << c.b1;
  }
}

TEST(KerasNumerics, FiftyStepsOfFitWithAdamFollowKeras3) {
  // A linear model (no bias) with mean squared error: its gradient is simple enough to write here,
  // 2 / (batch * outputs) * X^T (X W - Y), computed in double and rounded to float32.
  constexpr int64_t kN = 32, kIn = 5, kOut = 3;
  const std::vector<float> x = test::random_floats(kN * kIn, 11), y = test::random_floats(kN * kOut, 12);
  Model model = Model::sequential(Strategy::mirrored({"cpu"}), {kIn});
  model.add_dense(kOut, Activation::None, false);
  CompileOptions co;
  co.loss.kind = LossKind::MeanSquaredError;
  co.optimizer.learning_rate = 0.01;
  co.optimizer.beta1 = 0;  // an explicit zero, as Keras accepts
  co.seed = 3;
  model.compile(co);
  std::vector<float> w = model.get_weights(), m(w.size(), 0.0f), v(w.size(), 0.0f);
  const KerasAdam keras(0.01, 0.0, 0.999, 1e-7);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kN, kIn}, y.data(), DType::F32, {kN, kOut});
  d.batch(kN, false);
  FitOptions fo;
  fo.epochs = 50;
  ASSERT_EQ(model.fit(d, fo, nullptr, nullptr), Status::Ok);
  for (int64_t t = 1; t <= 50; ++t) {
    std::vector<float> g(w.size());
    for (int64_t i = 0; i < kIn; ++i)
      for (int64_t o = 0; o < kOut; ++o) {
        double sum = 0;
        for (int64_t r = 0; r < kN; ++r) {
          double out = 0;
          for (int64_t k = 0; k < kIn; ++k) out += static_cast<double>(x[r * kIn + k]) * w[k * kOut + o];
          sum += static_cast<double>(x[r * kIn + i]) * (out - y[r * kOut + o]);
        }
        g[i * kOut + o] = static_cast<float>(2.0 * sum / (kN * kOut));
      }
    keras.step(t, w, g, m, v);
  }
  EXPECT_LE(relative_difference(model.get_weights(), w), 1e-6);
}

}  // namespace
}  // namespace kx
