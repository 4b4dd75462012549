// Keras's sample_weight (in datasets) and class_weight (a fit option): the SGD step, the loss and the
// accuracy against a float64 hand computation, on 1 to 3 replicas and through the streaming feed; the
// validation and evaluate weighting; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/train/class_weights.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

constexpr int64_t kIn = 4, kClasses = 3;
constexpr double kRate = 0.5;

struct Problem {
  std::vector<float> x, y;
  int64_t n = 0;
};

Problem problem() {
  Problem p;
  p.n = 7;
  p.x = test::random_floats(static_cast<size_t>(p.n * kIn), 31, -1.0f, 1.0f);
  p.y = {0, 1, 2, 0, 1, 2, 2};
  return p;
}

Dataset dataset(const Problem& p, const std::vector<float>* weights = nullptr) {
  Dataset d = Dataset::from_arrays(p.x.data(), DType::F32, {p.n, kIn}, p.y.data(), DType::F32, {p.n},
                                   weights ? weights->data() : nullptr);
  d.batch(p.n, false);  // one step: the whole batch
  return d;
}

Strategy cpu_replicas(int n, bool stream = false) {
  Strategy s = Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(n), "cpu"));
  s.set_num_threads(n);
  if (stream) s.set_data_streaming(DataStreaming::Always);
  return s;
}

// Plain SGD at kRate with accuracy: a step easy to compute by hand.
CompileOptions plain_sgd() {
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = kRate;
  co.accuracy = true;
  co.seed = 11;
  return co;
}

// Dense(3, softmax) on 4 inputs trained by plain SGD.
Model softmax_regression(const Strategy& s) {
  Model m = Model::sequential(s, {kIn});
  m.add_dense(kClasses, Activation::Softmax);
  m.compile(plain_sgd());
  return m;
}

struct Reference {
  std::vector<double> weights;  // kernel [kIn, kClasses] then bias, after the step
  double loss = 0, accuracy = 0;
};

// float64: the batch's loss sum(w * l) / n and accuracy sum(w * hit) / sum(w) at weights w0, and
// w0 - lr * d(loss)/d(weights).
Reference by_hand(const std::vector<float>& w0, const Problem& p, const std::vector<double>& sw) {
  Reference r;
  r.weights.assign(w0.begin(), w0.end());
  std::vector<double> grad(w0.size(), 0.0);
  const double* kernel = r.weights.data();
  const double* bias = r.weights.data() + kIn * kClasses;
  double weight_sum = 0, hits = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    double z[kClasses], mx = -1e300, se = 0;
    for (int64_t c = 0; c < kClasses; ++c) {
      z[c] = bias[c];
      for (int64_t k = 0; k < kIn; ++k) z[c] += p.x[i * kIn + k] * kernel[k * kClasses + c];
      mx = std::max(mx, z[c]);
    }
    for (double v : z) se += std::exp(v - mx);
    const auto label = static_cast<int64_t>(p.y[i]);
    const double w = sw[i];
    r.loss += w * -(z[label] - mx - std::log(se)) / static_cast<double>(p.n);
    hits += w * ((std::max_element(z, z + kClasses) - z) == label ? 1.0 : 0.0);
    weight_sum += w;
    for (int64_t c = 0; c < kClasses; ++c) {
      const double dz = w * (std::exp(z[c] - mx) / se - (c == label ? 1.0 : 0.0)) / static_cast<double>(p.n);
      for (int64_t k = 0; k < kIn; ++k) grad[k * kClasses + c] += p.x[i * kIn + k] * dz;
      grad[kIn * kClasses + c] += dz;
    }
  }
  r.accuracy = weight_sum > 0 ? hits / weight_sum : 0.0;
  for (size_t j = 0; j < grad.size(); ++j) r.weights[j] -= kRate * grad[j];
  return r;
}

double largest_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, std::fabs(a[j] - b[j]));
  return worst;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// One fit step of a weighted batch (sample weights in the data, or class_weight) against the hand
// computation; returns the weights after it.
std::vector<float> check_step(const Strategy& s, const Problem& p, const std::vector<double>& expected_weights,
                              const std::vector<float>* sample_weight, const std::vector<float>& class_weight) {
  Model m = softmax_regression(s);
  const std::vector<float> w0 = m.get_weights();
  // The layout the hand computation assumes: predict agrees with it.
  const std::vector<float> probs = m.predict(p.x.data(), 1);
  double z[kClasses], se = 0;
  for (int64_t c = 0; c < kClasses; ++c) {
    z[c] = w0[static_cast<size_t>(kIn * kClasses + c)];
    for (int64_t k = 0; k < kIn; ++k) z[c] += p.x[k] * w0[static_cast<size_t>(k * kClasses + c)];
    se += std::exp(z[c]);
  }
  for (int64_t c = 0; c < kClasses; ++c) EXPECT_NEAR(probs[c], std::exp(z[c]) / se, 1e-6);

  Dataset d = dataset(p, sample_weight);
  FitOptions fo;
  fo.class_weight = class_weight;
  History h;
  EXPECT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
  const Reference ref = by_hand(w0, p, expected_weights);
  const std::vector<float> after = m.get_weights();
  EXPECT_LE(largest_difference(after, ref.weights), 2e-6);
  EXPECT_NEAR(h.get("loss", 0), ref.loss, 1e-6);
  EXPECT_NEAR(h.get("accuracy", 0), ref.accuracy, 1e-12);
  // The weighting matters here: the unweighted step lands elsewhere.
  const Reference plain = by_hand(w0, p, std::vector<double>(static_cast<size_t>(p.n), 1.0));
  EXPECT_GT(largest_difference(after, plain.weights), 1e-3);
  return after;
}

const std::vector<float> kSampleWeights = {0.5f, 2.0f, 0.0f, 1.0f, 3.0f, 0.25f, 1.5f};

TEST(SampleWeights, WeighTheSgdStepLossAndAccuracyAsAHandComputation) {
  const Problem p = problem();
  std::vector<float> first;
  for (int replicas : {1, 2, 3})
    for (bool stream : {false, true}) {
      SCOPED_TRACE(std::to_string(replicas) + " replicas" + (stream ? ", streamed" : ""));
      const std::vector<float> after = check_step(cpu_replicas(replicas, stream), p, as_double(kSampleWeights),
                                                  &kSampleWeights, {});
      if (first.empty()) first = after;
      EXPECT_LE(test::relative_difference(after, first), 1e-6);
    }
}

TEST(ClassWeight, WeighsTheStepAsTheSampleWeightsOfEachClass) {
  const Problem p = problem();
  // Class 2 lies beyond the vector: it weighs 1 (Keras's class_weight.get(c, 1.0)).
  const std::vector<float> class_weight = {2.0f, 0.5f};
  std::vector<float> per_sample;
  for (float label : p.y) per_sample.push_back(label < 2 ? class_weight[static_cast<size_t>(label)] : 1.0f);
  for (int replicas : {1, 3}) {
    SCOPED_TRACE(std::to_string(replicas) + " replicas");
    const std::vector<float> by_class = check_step(cpu_replicas(replicas), p, as_double(per_sample), nullptr,
                                                   class_weight);
    const std::vector<float> by_sample = check_step(cpu_replicas(replicas), p, as_double(per_sample), &per_sample, {});
    EXPECT_EQ(by_class, by_sample);  // the same step, bit for bit
  }
}

TEST(SampleWeights, AllZeroLeaveTheWeightsAndGiveZeroLossAndAccuracy) {
  const Problem p = problem();
  const std::vector<float> zeros(static_cast<size_t>(p.n), 0.0f);
  Model m = softmax_regression(cpu_replicas(2));
  const std::vector<float> w0 = m.get_weights();
  Dataset d = dataset(p, &zeros);
  History h;
  ASSERT_EQ(m.fit(d, FitOptions{}, nullptr, &h), Status::Ok);
  EXPECT_EQ(m.get_weights(), w0);
  EXPECT_EQ(h.get("loss", 0), 0.0);
  EXPECT_EQ(h.get("accuracy", 0), 0.0);  // Keras's Mean: 0 / 0 is 0
}

TEST(SampleWeights, WeighEvaluateAndValidationButClassWeightOnlyTrains) {
  const Problem p = problem();
  const std::vector<float> val_weights = {1.0f, 0.0f, 2.0f, 0.5f, 1.0f, 3.0f, 0.0f};
  for (int replicas : {1, 3}) {
    SCOPED_TRACE(std::to_string(replicas) + " replicas");
    Model m = softmax_regression(cpu_replicas(replicas));
    Dataset train = dataset(p);
    Dataset val = dataset(p, &val_weights);
    FitOptions fo;
    fo.validation = &val;
    fo.class_weight = {3.0f, 1.0f, 0.5f};
    History h;
    ASSERT_EQ(m.fit(train, fo, nullptr, &h), Status::Ok);
    // Validation ran on the trained weights, weighted by its own weights and not by class_weight.
    const std::vector<float> trained = m.get_weights();
    const Reference ref = by_hand(trained, p, as_double(val_weights));
    EXPECT_NEAR(h.get("val_loss", 0), ref.loss, 1e-6);
    EXPECT_NEAR(h.get("val_accuracy", 0), ref.accuracy, 1e-12);
    const EvalResult e = m.evaluate(val);
    EXPECT_NEAR(e.loss, ref.loss, 1e-6);
    EXPECT_NEAR(e.accuracy, ref.accuracy, 1e-12);
    // Unweighted data evaluates unweighted.
    const Reference plain = by_hand(trained, p, std::vector<double>(static_cast<size_t>(p.n), 1.0));
    EXPECT_NEAR(m.evaluate(train).loss, plain.loss, 1e-6);
    EXPECT_GT(std::fabs(plain.loss - ref.loss), 1e-3);
  }
}

TEST(SampleWeights, ValidationSplitKeepsTheHeldOutWeights) {
  const Problem p = problem();
  Model m = softmax_regression(cpu_replicas(1));
  Dataset all = dataset(p, &kSampleWeights);
  all.batch(2, false);
  FitOptions fo;
  fo.validation_split = 0.3;  // floor(7 * 0.7) = 4 train, 3 validate
  History h;
  ASSERT_EQ(m.fit(all, fo, nullptr, &h), Status::Ok);
  Dataset held_out = all.skip(4);
  const EvalResult e = m.evaluate(held_out);
  EXPECT_DOUBLE_EQ(h.get("val_loss", 0), e.loss);
  Problem last;
  last.n = 3;
  last.x.assign(p.x.begin() + 4 * kIn, p.x.end());
  last.y.assign(p.y.begin() + 4, p.y.end());
  const Reference ref = by_hand(m.get_weights(), last, as_double({kSampleWeights.begin() + 4, kSampleWeights.end()}));
  EXPECT_NEAR(e.loss, ref.loss, 1e-6);  // over the 3 held-out samples, weighted
  EXPECT_NEAR(e.accuracy, ref.accuracy, 1e-12);
}

// Many shuffled steps with an uneven last batch: N replicas take the step of one, each from its own
// slice of the weights.
TEST(SampleWeights, ReplicasTrainAsOneDeviceOverManySteps) {
  const int64_t n = 40;
  Problem p;
  p.n = n;
  p.x = test::random_floats(static_cast<size_t>(n * kIn), 41, -1.0f, 1.0f);
  std::vector<float> w = test::random_floats(static_cast<size_t>(n), 42, 0.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i) p.y.push_back(static_cast<float>(i % kClasses));
  auto run = [&](int replicas, bool class_weighted) {
    Model m = softmax_regression(cpu_replicas(replicas));
    Dataset d = dataset(p, class_weighted ? nullptr : &w);
    d.shuffle(n, 5);
    d.batch(12, false);
    FitOptions fo;
    fo.epochs = 3;
    if (class_weighted) fo.class_weight = {0.2f, 1.7f, 1.1f};
    History h;
    EXPECT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
    return std::make_pair(m.get_weights(), h);
  };
  for (bool class_weighted : {false, true}) {
    const auto [one, h1] = run(1, class_weighted);
    const auto [three, h3] = run(3, class_weighted);
    EXPECT_LE(test::relative_difference(three, one), 1e-5);
    for (int e = 0; e < 3; ++e) {
      EXPECT_NEAR(h3.get("loss", e), h1.get("loss", e), 1e-6 * std::fabs(h1.get("loss", e)));
      EXPECT_NEAR(h3.get("accuracy", e), h1.get("accuracy", e), 1e-12);
    }
  }
}

// A checkpoint taken mid-epoch keeps the epoch's weight sum: the resumed epoch's accuracy is the
// uninterrupted one's.
TEST(SampleWeights, ResumeMidEpochKeepsTheWeightedAccuracy) {
  const int64_t n = 30;
  Problem p;
  p.n = n;
  p.x = test::random_floats(static_cast<size_t>(n * kIn), 51, -1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) p.y.push_back(static_cast<float>(i % kClasses));
  const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 52, 0.0f, 3.0f);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kx_weights_resume_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  Dataset d = dataset(p, &w);
  d.batch(6, false);
  History whole;
  {
    Model m = softmax_regression(cpu_replicas(1));
    Callbacks cb;
    cb.add_model_checkpoint(dir + "/ckpt-{step}.kx", 2, 0);
    ASSERT_EQ(m.fit(d, FitOptions{}, &cb, &whole), Status::Ok);
  }
  Model resumed = softmax_regression(cpu_replicas(1));
  FitOptions fo;
  fo.resume_from = dir + "/ckpt-2.kx";  // after batch 2 of 5
  History h;
  ASSERT_EQ(resumed.fit(d, fo, nullptr, &h), Status::Ok);
  EXPECT_NEAR(h.get("accuracy", 0), whole.get("accuracy", 0), 1e-12);
  EXPECT_NEAR(h.get("loss", 0), whole.get("loss", 0), 1e-9);
  std::filesystem::remove_all(dir);
}

template <class F>
void expect_invalid(F&& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one about " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(SampleWeights, BadWeightsAreClearErrors) {
  const Problem p = problem();
  for (float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> w(static_cast<size_t>(p.n), 1.0f);
    w[3] = bad;
    expect_invalid([&] { dataset(p, &w); }, "sample weight");
  }
  for (float bad : {-0.5f, std::numeric_limits<float>::quiet_NaN()}) {
    Model m = softmax_regression(cpu_replicas(1));
    Dataset d = dataset(p);
    FitOptions fo;
    fo.class_weight = {1.0f, bad};
    expect_invalid([&] { m.fit(d, fo, nullptr, nullptr); }, "class_weight[1]");
  }
  // Keras refuses class_weight together with sample weights.
  Model m = softmax_regression(cpu_replicas(1));
  Dataset d = dataset(p, &kSampleWeights);
  FitOptions fo;
  fo.class_weight = {1.0f, 2.0f};
  expect_invalid([&] { m.fit(d, fo, nullptr, nullptr); }, "class_weight cannot be used");
}

// A model whose softmax runs at every position of a sample (a 1x1 Conv2D over [1, P, kIn]) weighs each
// position by its sample's weight: one step is the step of a Dense model on the n * P positions as
// samples of their own, each with its sample's weight (the same loss sum(w * l) / (n * P), gradient
// and accuracy). class_weight, which needs one class per sample, is refused for it, as Keras does.
TEST(SampleWeights, WeighEveryPositionOfASampleByItsWeight) {
  constexpr int64_t kPositions = 3, n = 5;
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * kPositions * kIn), 51, -1.0f, 1.0f);
  std::vector<float> y, w = {0.5f, 2.0f, 0.0f, 1.0f, 3.0f}, w_per_position;
  for (int64_t i = 0; i < n * kPositions; ++i) {
    y.push_back(static_cast<float>((i * 7 + 1) % kClasses));
    w_per_position.push_back(w[static_cast<size_t>(i / kPositions)]);
  }
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "staged");
    Model positions = Model::sequential(cpu_replicas(1, stream), {1, kPositions, kIn});
    positions.add_conv2d(kClasses, 1, 1, 1, Padding::Valid, Activation::Softmax);
    Model samples = softmax_regression(cpu_replicas(1, stream));
    positions.compile(plain_sgd());
    samples.set_weights(positions.get_weights());  // kernel [1, 1, kIn, kClasses] is Dense's [kIn, kClasses]
    ASSERT_LE(test::relative_difference(positions.predict(x.data(), n), samples.predict(x.data(), n * kPositions)),
              1e-6);

    Dataset by_position = Dataset::from_arrays(x.data(), DType::F32, {n, 1, kPositions, kIn}, y.data(), DType::F32,
                                               {n, 1, kPositions}, w.data());
    by_position.batch(n, false);
    Dataset by_sample = Dataset::from_arrays(x.data(), DType::F32, {n * kPositions, kIn}, y.data(), DType::F32,
                                             {n * kPositions}, w_per_position.data());
    by_sample.batch(n * kPositions, false);
    History hp, hs;
    FitOptions fo;
    ASSERT_EQ(positions.fit(by_position, fo, nullptr, &hp), Status::Ok);
    ASSERT_EQ(samples.fit(by_sample, fo, nullptr, &hs), Status::Ok);
    EXPECT_LE(test::relative_difference(positions.get_weights(), samples.get_weights()), 1e-6);
    EXPECT_NEAR(hp.get("loss", 0), hs.get("loss", 0), 1e-6);
    EXPECT_NEAR(hp.get("accuracy", 0), hs.get("accuracy", 0), 1e-9);
    const EvalResult weighed = positions.evaluate(by_position, 0);
    EXPECT_NEAR(weighed.accuracy, samples.evaluate(by_sample, 0).accuracy, 1e-9);

    Dataset unweighted =
        Dataset::from_arrays(x.data(), DType::F32, {n, 1, kPositions, kIn}, y.data(), DType::F32, {n, 1, kPositions});
    fo.class_weight = {1.0f, 2.0f};
    expect_invalid([&] { positions.fit(unweighted, fo, nullptr, nullptr); }, "class_weight needs one class per sample");
  }
}

TEST(ClassWeight, FindsTheClassAsKeras) {
  // One value per sample: rounded half to even (np.round); negative or non-finite: no class (1).
  const std::vector<float> x(6, 0.0f);
  const std::vector<float> y = {0.4f, 0.6f, 2.5f, 1.5f, -1.0f, std::numeric_limits<float>::quiet_NaN()};
  const Dataset scalar = Dataset::from_arrays(x.data(), DType::F32, {6, 1}, y.data(), DType::F32, {6});
  const std::vector<float> cw = {10.0f, 20.0f, 30.0f};
  EXPECT_EQ(*core::class_sample_weights(scalar, cw), (std::vector<float>{10, 20, 30, 30, 1, 1}));
  // One-hot targets: the argmax (the first largest).
  const std::vector<float> onehot = {0, 0, 1, 0, 1, 0, 0.5f, 0.5f, 0};
  const Dataset cat = Dataset::from_arrays(x.data(), DType::F32, {3, 2}, onehot.data(), DType::F32, {3, 3});
  EXPECT_EQ(*core::class_sample_weights(cat, {1.0f, 2.0f}), (std::vector<float>{1, 2, 1}));
}

}  // namespace
}  // namespace kx
