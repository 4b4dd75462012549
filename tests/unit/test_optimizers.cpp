// SGD (with momentum) and Adam against float64 re-implementations of Keras's update rules, and
// Keras's moving average of the weights (use_ema) over a whole fit.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "backend/adam_math.hpp"
#include "backend/backend.hpp"
#include "backend/optimizer_math.hpp"
#include "kx/error.hpp"
#include "kx/kx.hpp"
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
    const float rate = static_cast<float>(lr_t);  // read from the backend's (here host) memory
    be->adam_update(n, p.data(), g.data(), m.data(), v.data(), &rate, backend::adam_one_minus(b1),
                    backend::adam_one_minus(b2), eps, nullptr);
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
      const float rate = 0.01f;
      be->sgd_update(n, p.data(), g.data(), vel.data(), &rate, static_cast<float>(momentum), nullptr);
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

// Keras 3's AdamW: p -= p * weight_decay * lr, then Adam's step with the bias-corrected rate.
TEST(Optimizer, AdamWMatchesKerasOverSeveralSteps) {
  const int64_t n = 40000;
  const double lr = 2e-3, b1 = 0.9, b2 = 0.999, eps = 1e-7, wd = 0.05;
  auto be = backend::make_cpu_backend(2);
  FloatBuffer p = test::to_buffer(test::random_floats(n, 32)), m(n, 0.0f), v(n, 0.0f);
  test::Vec pd(p.begin(), p.end()), md(n, 0.0), vd(n, 0.0);
  for (int t = 1; t <= 5; ++t) {
    FloatBuffer g = test::to_buffer(test::random_floats(n, 300 + t));
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    const float rate_t = static_cast<float>(lr_t), rate = static_cast<float>(lr);
    be->adamw_update(n, p.data(), g.data(), m.data(), v.data(), &rate_t, &rate, static_cast<float>(wd),
                     backend::adam_one_minus(b1), backend::adam_one_minus(b2), eps, nullptr);
    for (int64_t i = 0; i < n; ++i) {
      pd[i] -= pd[i] * wd * lr;
      md[i] = b1 * md[i] + (1 - b1) * g[i];
      vd[i] = b2 * vd[i] + (1 - b2) * g[i] * g[i];
      pd[i] -= lr_t * md[i] / (std::sqrt(vd[i]) + eps);
    }
  }
  EXPECT_EQ(test::first_mismatch(p, pd, n, 1e-6), -1);
  EXPECT_EQ(test::first_mismatch(v, vd, n, 1e-6), -1);
}

// Keras 3's RMSprop, plain, with momentum, centered and both.
TEST(Optimizer, RmsPropMatchesKerasOverSeveralSteps) {
  const int64_t n = 3000;
  const double lr = 1e-2, rho = 0.8, eps = 1e-7;
  auto be = backend::make_cpu_backend(2);
  for (const double momentum : {0.0, 0.5})
    for (const bool centered : {false, true}) {
      SCOPED_TRACE("momentum " + std::to_string(momentum) + (centered ? " centered" : ""));
      FloatBuffer p = test::to_buffer(test::random_floats(n, 51)), v(n, 0.0f), m(n, 0.0f), a(n, 0.0f);
      test::Vec pd(p.begin(), p.end()), vd(n, 0.0), md(n, 0.0), ad(n, 0.0);
      const backend::RmsPropConstants c = backend::rmsprop_constants(rho, momentum, eps);
      for (int t = 0; t < 4; ++t) {
        FloatBuffer g = test::to_buffer(test::random_floats(n, 400 + t));
        const float rate = static_cast<float>(lr);
        be->rmsprop_update(n, p.data(), g.data(), v.data(), momentum != 0 ? m.data() : nullptr,
                           centered ? a.data() : nullptr, &rate, c, nullptr);
        for (int64_t i = 0; i < n; ++i) {
          const double gi = g[i];
          vd[i] = rho * vd[i] + (1 - rho) * gi * gi;
          double denominator = vd[i] + eps;
          if (centered) {
            ad[i] = rho * ad[i] + (1 - rho) * gi;
            denominator = vd[i] - ad[i] * ad[i] + eps;
          }
          const double increment = lr * gi / std::sqrt(denominator);
          if (momentum != 0) {
            md[i] = momentum * md[i] + increment;
            pd[i] -= md[i];
          } else {
            pd[i] -= increment;
          }
        }
      }
      EXPECT_EQ(test::first_mismatch(p, pd, n, 1e-5), -1);
      EXPECT_EQ(test::first_mismatch(v, vd, n, 1e-5), -1);
    }
}

TEST(Optimizer, DefaultsAreKeras) {
  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::AdamW;
  EXPECT_DOUBLE_EQ(adamw.resolved().learning_rate.value(), 1e-3);
  EXPECT_DOUBLE_EQ(adamw.weight_decay, 0.004);
  OptimizerConfig rmsprop;
  rmsprop.kind = OptimizerKind::RmsProp;
  EXPECT_DOUBLE_EQ(rmsprop.resolved().learning_rate.value(), 1e-3);
  EXPECT_DOUBLE_EQ(rmsprop.rho, 0.9);
  EXPECT_FALSE(rmsprop.centered);
  EXPECT_EQ(rmsprop.slot_count(), 1);  // the velocity
  rmsprop.momentum = 0.5;
  rmsprop.centered = true;
  EXPECT_EQ(rmsprop.slot_count(), 3);
  rmsprop.rho = 1.0;
  EXPECT_THROW(rmsprop.resolved(), Error);
  adamw.weight_decay = -0.1;
  EXPECT_THROW(adamw.resolved(), Error);
  OptimizerConfig adam;
  const OptimizerConfig a = adam.resolved();
  EXPECT_DOUBLE_EQ(a.learning_rate.value(), 1e-3);
  EXPECT_DOUBLE_EQ(a.beta1, 0.9);
  EXPECT_DOUBLE_EQ(a.beta2, 0.999);
  EXPECT_DOUBLE_EQ(a.epsilon, 1e-7);
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  EXPECT_DOUBLE_EQ(sgd.resolved().learning_rate.value(), 1e-2);
  OptimizerConfig bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(bad.resolved(), Error);
  bad.beta1 = 0;
  bad.learning_rate = -1;
  EXPECT_THROW(bad.resolved(), Error);
  bad.learning_rate = NAN;
  EXPECT_THROW(bad.resolved(), Error);
}

// Keeps the weights after every batch.
class WeightRecorder final : public Callback {
 public:
  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind == EventKind::BatchEnd) steps.push_back(control.get_weights());
    return false;
  }
  std::vector<std::vector<float>> steps;
};

Dataset ema_data() {
  const int64_t n = 120;
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * 5), 8);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = x[static_cast<size_t>(i * 5)] > 0 ? 1.0f : 0.0f;
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 5}, y.data(), DType::F32, {n});
  d.shuffle(n, 4);
  d.batch(16, false);
  return d;
}

Model ema_model(int replicas, bool use_ema) {
  Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")), {5});
  m.add_dense(7, Activation::Tanh);
  m.add_dense(2, Activation::Softmax);
  CompileOptions co;
  co.optimizer.learning_rate = 0.05;
  co.optimizer.use_ema = use_ema;
  co.optimizer.ema_momentum = 0.8;
  co.seed = 5;
  m.compile(co);
  return m;
}

TEST(Optimizer, EmaFollowsKerasAndReplacesTheTrainedWeightsWhenFitEnds) {
  // The weights a fit without EMA goes through, step by step; EMA must not change them.
  Dataset d = ema_data();
  Model plain = ema_model(1, false);
  auto recorder = std::make_shared<WeightRecorder>();
  Callbacks cb;
  cb.add(recorder);
  FitOptions fo;
  fo.epochs = 3;
  ASSERT_EQ(plain.fit(d, fo, &cb, nullptr), Status::Ok);
  ASSERT_EQ(recorder->steps.size(), 24u);
  // Keras: the first step copies the weights, then ema = 0.8 ema + 0.2 w.
  test::Vec ema(recorder->steps[0].begin(), recorder->steps[0].end());
  for (size_t t = 1; t < recorder->steps.size(); ++t)
    for (size_t i = 0; i < ema.size(); ++i) ema[i] = 0.8 * ema[i] + 0.2 * recorder->steps[t][i];
  for (int replicas : {1, 2}) {
    Dataset d2 = ema_data();
    Model averaged = ema_model(replicas, true);
    auto seen = std::make_shared<WeightRecorder>();
    Callbacks cb2;
    cb2.add(seen);
    ASSERT_EQ(averaged.fit(d2, fo, &cb2, nullptr), Status::Ok);
    ASSERT_EQ(seen->steps.size(), recorder->steps.size());
    EXPECT_LE(test::relative_difference(seen->steps.back(), recorder->steps.back()), 1e-5) << "training itself is unchanged";
    const std::vector<float> final_weights = averaged.get_weights();
    EXPECT_EQ(test::first_mismatch(final_weights, ema, ema.size(), 1e-5), -1) << replicas << " replicas";
    EXPECT_GT(test::relative_difference(final_weights, plain.get_weights()), 1e-3) << "the average is not the weights";
  }
}

TEST(Optimizer, EmaOfALayerUnfrozenBetweenFitsStartsAtItsWeights) {
  Dataset d = ema_data();
  Model m = ema_model(1, true);
  m.set_trainable("dense", false);
  FitOptions fo;
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  m.set_trainable("dense", true);
  // Every average equals its weight now (the frozen layer's was started at its weights), so the
  // second fit's average starts here.
  const std::vector<float> start = m.get_weights();
  auto recorder = std::make_shared<WeightRecorder>();
  Callbacks cb;
  cb.add(recorder);
  ASSERT_EQ(m.fit(d, fo, &cb, nullptr), Status::Ok);
  test::Vec ema(start.begin(), start.end());
  for (const std::vector<float>& w : recorder->steps)
    for (size_t i = 0; i < ema.size(); ++i) ema[i] = 0.8 * ema[i] + 0.2 * w[i];
  EXPECT_EQ(test::first_mismatch(m.get_weights(), ema, ema.size(), 1e-5), -1);
}

TEST(Optimizer, EmaStateTravelsWithCheckpointsAndSavedModels) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kx-ema-" + std::to_string(::getpid()) + ".kx")).string();
  Dataset d = ema_data();
  Model a = ema_model(1, true);
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(a.fit(d, fo, nullptr, nullptr), Status::Ok);
  a.save(path);
  Model b = Model::load(Strategy::default_strategy(), path);
  std::filesystem::remove(path);
  EXPECT_TRUE(b.get_weights() == a.get_weights());
  // Both continue from the same weights and the same average.
  Dataset d1 = ema_data(), d2 = ema_data();
  ASSERT_EQ(a.fit(d1, fo, nullptr, nullptr), Status::Ok);
  ASSERT_EQ(b.fit(d2, fo, nullptr, nullptr), Status::Ok);
  EXPECT_TRUE(a.get_weights() == b.get_weights());
}

TEST(Optimizer, EmaMomentumOutsideItsRangeIsRejected) {
  for (double bad : {1.0, -0.5, static_cast<double>(NAN)}) {
    OptimizerConfig c;
    c.use_ema = true;
    c.ema_momentum = bad;
    EXPECT_THROW(c.resolved(), Error) << bad;
  }
  OptimizerConfig c;
  c.use_ema = true;
  EXPECT_DOUBLE_EQ(c.resolved().ema_momentum, 0.99);
}

}  // namespace
}  // namespace kx
