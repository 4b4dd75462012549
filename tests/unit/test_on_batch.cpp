// train_on_batch / test_on_batch against fit and evaluate, and the batch's own loss in BatchEnd events.
#include <gtest/gtest.h>

#include <cmath>

#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

constexpr int64_t kIn = 6, kClasses = 3;

struct Arrays {
  std::vector<float> x, y;
  int64_t n;
};

Arrays arrays(int64_t n, uint32_t seed) {
  Arrays a{test::random_floats(static_cast<size_t>(n * kIn), seed), std::vector<float>(static_cast<size_t>(n)), n};
  for (int64_t i = 0; i < n; ++i)
    a.y[static_cast<size_t>(i)] = static_cast<float>((a.x[static_cast<size_t>(i * kIn)] > 0) + (a.x[static_cast<size_t>(i * kIn + 1)] > 0));
  return a;
}

Model model(int replicas) {
  Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")), {kIn});
  m.add_dense(16, Activation::Relu);
  m.add_dropout(0.25f);
  m.add_dense(kClasses, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = 5;
  m.compile(co);
  return m;
}

Dataset dataset_of(const Arrays& a) {
  Dataset d = Dataset::from_arrays(a.x.data(), DType::F32, {a.n, kIn}, a.y.data(), DType::F32, {a.n});
  d.batch(a.n, false);
  return d;
}

TEST(OnBatch, TrainOnBatchIsOneStepOfFitBitwise) {
  for (int replicas : {1, 2, 3}) {
    Model by_fit = model(replicas), by_batch = model(replicas);
    for (int step = 0; step < 4; ++step) {
      const Arrays a = arrays(20 + step, 40 + step);  // a new batch, of a new size, each step
      Dataset d = dataset_of(a);
      FitOptions fo;
      History h;
      ASSERT_EQ(by_fit.fit(d, fo, nullptr, &h), Status::Ok);
      const EvalResult r = by_batch.train_on_batch(a.x.data(), a.y.data(), a.n);
      EXPECT_EQ(r.loss, h.get("loss", 0)) << replicas << " replicas, step " << step;
      EXPECT_EQ(r.accuracy, h.get("accuracy", 0)) << replicas << " replicas, step " << step;
      EXPECT_EQ(by_batch.get_weights(), by_fit.get_weights()) << replicas << " replicas, step " << step;
    }
  }
}

TEST(OnBatch, TestOnBatchIsEvaluateAndChangesNothing) {
  Model m = model(2);
  const Arrays a = arrays(30, 90);
  const std::vector<float> before = m.get_weights();
  const EvalResult t = m.test_on_batch(a.x.data(), a.y.data(), a.n);
  const EvalResult e = m.evaluate(dataset_of(a));
  EXPECT_EQ(t.loss, e.loss);
  EXPECT_EQ(t.accuracy, e.accuracy);
  EXPECT_EQ(m.get_weights(), before);
  std::vector<float> bad = a.y;
  bad[3] = 7;  // not a class
  EXPECT_EQ(test::status_of([&] { m.train_on_batch(a.x.data(), bad.data(), a.n); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { m.train_on_batch(a.x.data(), a.y.data(), 0); }), Status::InvalidArgument);
  EXPECT_EQ(m.get_weights(), before);  // refused calls change nothing
  Model uncompiled = Model::sequential(Strategy::mirrored({"cpu"}), {kIn});
  uncompiled.add_dense(2);
  EXPECT_EQ(test::status_of([&] { uncompiled.train_on_batch(a.x.data(), a.y.data(), a.n); }), Status::Misuse);
}

// Records each BatchEnd's running and own loss.
class BatchLosses final : public Callback {
 public:
  bool on_event(const Event& e, TrainingControl&) override {
    if (e.kind == EventKind::BatchEnd) {
      running.push_back(e.loss);
      own.push_back(e.batch_loss);
      own_accuracy.push_back(e.batch_accuracy);
    }
    return false;
  }
  std::vector<double> running, own, own_accuracy;
};

TEST(OnBatch, BatchEndCarriesTheBatchsOwnLossBesideTheRunningMean) {
  const Arrays a = arrays(40, 95);
  Dataset d = Dataset::from_arrays(a.x.data(), DType::F32, {a.n, kIn}, a.y.data(), DType::F32, {a.n});
  d.batch(10, false);  // 4 batches of 10
  Model m = model(1);
  Model twin = model(1);
  auto rec = std::make_shared<BatchLosses>();
  Callbacks cb;
  cb.add(rec);
  FitOptions fo;
  ASSERT_EQ(m.fit(d, fo, &cb, nullptr), Status::Ok);
  ASSERT_EQ(rec->own.size(), 4u);
  double sum = 0;
  for (size_t i = 0; i < 4; ++i) {
    // The same batch through train_on_batch on a twin gives the same loss.
    const EvalResult r = twin.train_on_batch(a.x.data() + i * 10 * kIn, a.y.data() + i * 10, 10);
    EXPECT_EQ(rec->own[i], r.loss) << i;
    EXPECT_EQ(rec->own_accuracy[i], r.accuracy) << i;
    sum += rec->own[i];
    EXPECT_NEAR(rec->running[i], sum / static_cast<double>(i + 1), 1e-12) << i;  // equal batches: the mean
  }
}

}  // namespace
}  // namespace kx
