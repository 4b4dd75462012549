// Whole models: the training step's gradient against finite differences of a float64 model, fit
// semantics (batches, callbacks, stopping, determinism), JSON, errors, and Fashion-MNIST when present.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/callbacks/progress_bar.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

struct Toy {
  std::vector<float> x, y;
  int64_t n, in;
};

// n samples of `in` features; label = index of the largest of the first `classes` features.
Toy toy_data(int64_t n, int64_t in, int64_t classes, uint32_t seed) {
  Toy t{test::random_floats(n * in, seed), std::vector<float>(n), n, in};
  for (int64_t i = 0; i < n; ++i) {
    const float* row = t.x.data() + i * in;
    t.y[i] = static_cast<float>(std::max_element(row, row + classes) - row);
  }
  return t;
}

Dataset dataset_of(const Toy& t) {
  return Dataset::from_arrays(t.x.data(), DType::F32, {t.n, t.in}, t.y.data(), DType::F32, {t.n});
}

struct StepCase {
  Activation last;
  LossKind loss;
  bool from_logits;
  int64_t outputs;
  const char* name;
};

class ModelGradient : public ::testing::TestWithParam<StepCase> {};

// One SGD step with learning rate 1 moves the weights by exactly -gradient; compare that with finite
// differences of a float64 model. This checks the whole step, the folded softmax/sigmoid included.
TEST_P(ModelGradient, OneSgdStepEqualsMinusTheFiniteDifferenceGradient) {
  const StepCase c = GetParam();
  const int64_t rows = 6, in = 7, hidden = 5, out = c.outputs;
  Model m = Model::sequential(Strategy::default_strategy(), {in});
  m.add_dense(hidden, Activation::Tanh);
  m.add_dense(out, c.last);
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = 1.0;
  co.loss = {c.loss, c.from_logits};
  m.compile(co);

  Toy t = toy_data(rows, in, std::min<int64_t>(out, in), 51);
  const bool sparse = c.loss == LossKind::SparseCategoricalCrossentropy;
  std::vector<float> y = t.y;
  if (!sparse) {  // targets per output
    y.assign(rows * out, 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < out; ++j)
        y[r * out + j] = c.loss == LossKind::MeanSquaredError ? 0.3f * static_cast<float>(j) - 0.2f
                                                                : (j == static_cast<int64_t>(t.y[r]) % out ? 1.0f : 0.0f);
  }
  const Shape y_shape = sparse ? Shape{rows} : Shape{rows, out};
  Dataset d = Dataset::from_arrays(t.x.data(), DType::F32, {rows, in}, y.data(), DType::F32, y_shape);
  d.batch(rows, false);

  const std::vector<float> w0 = m.get_weights();
  FitOptions fo;
  fo.steps_per_epoch = 1;
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  const std::vector<float> w1 = m.get_weights();

  auto loss = [&](const Vec& w) {
    const int64_t k1 = in * hidden, k2 = hidden * out;
    Vec W1(w.begin(), w.begin() + k1), b1(w.begin() + k1, w.begin() + k1 + hidden);
    Vec W2(w.begin() + k1 + hidden, w.begin() + k1 + hidden + k2), b2(w.begin() + k1 + hidden + k2, w.end());
    const Vec h = test::dense_forward(Vec(t.x.begin(), t.x.end()), W1, b1, rows, in, hidden, Activation::Tanh);
    const Vec o = test::dense_forward(h, W2, b2, rows, hidden, out, c.last);
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < out; ++j) {
        const double p = o[r * out + j];
        const double target = sparse ? (j == static_cast<int64_t>(y[r]) ? 1.0 : 0.0) : y[r * out + j];
        if (c.loss == LossKind::MeanSquaredError)
          total += (p - target) * (p - target) / out;
        else if (c.loss == LossKind::BinaryCrossentropy)
          total -= (target * std::log(p) + (1 - target) * std::log(1 - p)) / out;
        else
          total -= target * std::log(p);
      }
    }
    return total / rows;
  };
  const Vec g = test::numeric_gradient(loss, Vec(w0.begin(), w0.end()));
  std::vector<double> step(w0.size());
  for (size_t i = 0; i < w0.size(); ++i) step[i] = static_cast<double>(w0[i]) - w1[i];
  EXPECT_EQ(test::first_mismatch(step, g, g.size(), 2e-4), -1) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Steps, ModelGradient,
    ::testing::Values(StepCase{Activation::Softmax, LossKind::SparseCategoricalCrossentropy, false, 4, "softmax_sparse"},
                      StepCase{Activation::Softmax, LossKind::CategoricalCrossentropy, false, 4, "softmax_categorical"},
                      StepCase{Activation::Sigmoid, LossKind::BinaryCrossentropy, false, 3, "sigmoid_binary"},
                      StepCase{Activation::Relu, LossKind::MeanSquaredError, false, 3, "relu_mse"},
                      StepCase{Activation::Sigmoid, LossKind::MeanSquaredError, false, 3, "sigmoid_mse"}),
    [](const auto& info) { return std::string(info.param.name); });

Model mlp(int64_t in, int64_t classes, uint64_t seed = 0, bool dropout = false) {
  Model m = Model::sequential(Strategy::default_strategy(), {in});
  m.add_dense(32, Activation::Relu);
  if (dropout) m.add_dropout(0.25f);
  m.add_dense(classes, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = seed;
  m.compile(co);
  return m;
}

TEST(Model, CountsParametersLikeKeras) {
  Model m = Model::sequential(Strategy::default_strategy(), {28, 28});
  m.add_flatten();
  m.add_dense(256, Activation::Relu);
  m.add_dense(256, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  EXPECT_EQ(m.num_params(), 269322);
  EXPECT_EQ(m.output_shape(), Shape({10}));
}

TEST(Model, UseBiasFalseCountsParametersAndRoundTripsThroughJsonLikeKeras) {
  // Keras: Dense(10, use_bias=False) on 784 inputs has 7840 parameters.
  Model dense = Model::sequential(Strategy::default_strategy(), {784});
  dense.add_dense(10, Activation::Softmax, false);
  EXPECT_EQ(dense.num_params(), 7840);
  // Conv2D(8, 3x3, use_bias=False) -> BatchNormalization, whose beta takes the bias's place.
  Model cnn = Model::sequential(Strategy::default_strategy(), {8, 8, 3});
  cnn.add_conv2d(8, 3, 3, 1, Padding::Same, Activation::None, false);
  LayerSpec bn;
  bn.kind = LayerKind::BatchNormalization;
  cnn.add(bn);
  cnn.add_flatten();
  cnn.add_dense(4, Activation::Softmax);
  EXPECT_EQ(cnn.num_params(), 3 * 3 * 3 * 8 + 4 * 8 + (8 * 8 * 8 * 4 + 4));
  const std::string text = cnn.to_json();
  EXPECT_NE(text.find("\"use_bias\": false"), std::string::npos) << text;
  EXPECT_NE(text.find("\"use_bias\": true"), std::string::npos) << text;  // the last Dense's
  const Model again = Model::from_json(Strategy::default_strategy(), text);
  EXPECT_EQ(again.to_json(), text);
  EXPECT_EQ(again.num_params(), cnn.num_params());
  // As Keras writes it.
  const Model keras = Model::from_json(
      Strategy::default_strategy(),
      R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer","config":{"batch_shape":[null,784]}},)"
      R"({"class_name":"Dense","config":{"units":10,"activation":"softmax","use_bias":false}}]}})");
  EXPECT_EQ(keras.num_params(), 7840);
}

TEST(Model, DenseWithoutBiasComputesXWAndTrains) {
  Model m = Model::sequential(Strategy::default_strategy(), {3});
  m.add_dense(2, Activation::None, false);
  m.compile(CompileOptions{});
  m.set_weights({1, 2, 3, 4, 5, 6});  // the kernel [3, 2], and nothing else
  const float x[] = {1, 1, 1, 1, 0, -1};
  EXPECT_EQ(m.predict(x, 2), std::vector<float>({9, 12, -4, -4}));

  Toy t = toy_data(1000, 8, 4, 62);
  Dataset d = dataset_of(t);
  d.batch(32, false);
  Model net = Model::sequential(Strategy::default_strategy(), {8});
  net.add_dense(32, Activation::Relu, false);
  net.add_dense(4, Activation::Softmax, false);
  net.compile(CompileOptions{});
  EXPECT_EQ(net.num_params(), 8 * 32 + 32 * 4);
  const double before = net.evaluate(d).loss;
  FitOptions fo;
  fo.epochs = 3;
  ASSERT_EQ(net.fit(d, fo, nullptr, nullptr), Status::Ok);
  EXPECT_LT(net.evaluate(d).loss, before * 0.8);
}

TEST(Model, TrainsAToyProblemAndPredictsProbabilities) {
  Toy t = toy_data(2000, 8, 4, 61);
  Dataset d = dataset_of(t);
  d.shuffle(2000, 1);
  d.batch(32, false);
  Model m = mlp(8, 4, 0, true);
  const double before = m.evaluate(d).loss;
  History h;
  FitOptions fo;
  fo.epochs = 5;
  ASSERT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
  ASSERT_EQ(h.num_epochs(), 5);
  const EvalResult r = m.evaluate(d);
  EXPECT_LT(r.loss, before * 0.6);
  EXPECT_GT(r.accuracy, 0.8);
  EXPECT_LT(h.get("loss", 4), h.get("loss", 0));
  const std::vector<float> p = m.predict(t.x.data(), 3);
  ASSERT_EQ(p.size(), 12u);
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(p[4 * r] + p[4 * r + 1] + p[4 * r + 2] + p[4 * r + 3], 1.0, 1e-5);
}

TEST(Model, KeepsOrDropsTheLastPartialBatch) {
  Toy t = toy_data(10, 3, 2, 71);
  for (bool drop : {false, true}) {
    Dataset d = dataset_of(t);
    d.batch(4, drop);
    Model m = mlp(3, 2);
    std::vector<int64_t> steps;
    Callbacks cb;
    cb.add([&](const Event& e) {
      if (e.kind == EventKind::BatchEnd) steps.push_back(e.step);
      return false;
    });
    ASSERT_EQ(m.fit(d, FitOptions{}, &cb, nullptr), Status::Ok);
    EXPECT_EQ(steps.size(), drop ? 2u : 3u);
  }
}

TEST(Model, CallbacksSeeEventsInOrderAndCanStop) {
  Toy t = toy_data(64, 3, 2, 81);
  Dataset d = dataset_of(t);
  d.batch(16, false);
  Model m = mlp(3, 2);
  std::vector<EventKind> kinds;
  Callbacks cb;
  cb.add([&](const Event& e) {
    kinds.push_back(e.kind);
    return e.kind == EventKind::BatchEnd && e.epoch == 1 && e.step == 2;  // stop mid-epoch 2
  });
  History h;
  FitOptions fo;
  fo.epochs = 5;
  EXPECT_EQ(m.fit(d, fo, &cb, &h), Status::Stopped);
  EXPECT_EQ(h.num_epochs(), 2);
  const std::vector<EventKind> want = {EventKind::TrainBegin, EventKind::EpochBegin, EventKind::BatchEnd,
                                       EventKind::BatchEnd,   EventKind::BatchEnd,   EventKind::BatchEnd,
                                       EventKind::EpochEnd,   EventKind::EpochBegin, EventKind::BatchEnd,
                                       EventKind::BatchEnd,   EventKind::EpochEnd,   EventKind::TrainEnd};
  EXPECT_EQ(kinds, want);
}

TEST(Model, RecordsValidationMetricsInHistory) {
  Toy t = toy_data(300, 4, 3, 91);
  Dataset d = dataset_of(t);
  Dataset train = d.take(200), val = d.skip(200);
  Model m = mlp(4, 3);
  History h;
  FitOptions fo;
  fo.epochs = 2;
  fo.validation = &val;
  ASSERT_EQ(m.fit(train, fo, nullptr, &h), Status::Ok);
  const EvalResult r = m.evaluate(val);
  EXPECT_DOUBLE_EQ(h.get("val_loss", 1), r.loss);
  EXPECT_DOUBLE_EQ(h.get("val_accuracy", 1), r.accuracy);
  EXPECT_THROW(h.get("val_loss", 2), Error);
  EXPECT_THROW(h.get("precision", 0), Error);
}

TEST(Model, TwoRunsWithTheSameSeedsAreBitwiseIdentical) {
  Toy t = toy_data(500, 6, 3, 101);
  std::vector<float> w[2];
  for (auto& out : w) {
    Dataset d = dataset_of(t);
    d.shuffle(500, 3);
    d.batch(20, false);
    Model m = mlp(6, 3, 42, true);
    FitOptions fo;
    fo.epochs = 2;
    m.fit(d, fo, nullptr, nullptr);
    out = m.get_weights();
  }
  EXPECT_EQ(w[0], w[1]);
  Model other = mlp(6, 3, 43);
  EXPECT_NE(other.get_weights(), mlp(6, 3, 42).get_weights());
}

TEST(Model, RejectsMisuseAndDataThatDoesNotFit) {
  Toy t = toy_data(20, 3, 2, 111);
  Dataset d = dataset_of(t);
  Model m = Model::sequential(Strategy::default_strategy(), {3});
  EXPECT_EQ(test::status_of([&] { m.compile(CompileOptions{}); }), Status::Misuse);  // no layers
  m.add_dense(2, Activation::Softmax);
  EXPECT_EQ(test::status_of([&] { m.fit(d, FitOptions{}, nullptr, nullptr); }), Status::Misuse);  // before compile
  EXPECT_EQ(test::status_of([&] { m.evaluate(d); }), Status::Misuse);
  m.compile(CompileOptions{});
  EXPECT_EQ(test::status_of([&] { m.add_dense(3); }), Status::Misuse);  // after compile
  EXPECT_EQ(test::status_of([&] { m.compile(CompileOptions{}); }), Status::Misuse);

  Toy wide = toy_data(20, 4, 2, 112);
  Dataset dw = dataset_of(wide);
  EXPECT_EQ(test::status_of([&] { m.fit(dw, FitOptions{}, nullptr, nullptr); }), Status::InvalidArgument);
  std::vector<float> bad_labels(20, 2.0f);  // class 2 of a 2-class model
  Dataset dl = Dataset::from_arrays(t.x.data(), DType::F32, {20, 3}, bad_labels.data(), DType::F32, {20});
  EXPECT_EQ(test::status_of([&] { m.fit(dl, FitOptions{}, nullptr, nullptr); }), Status::InvalidArgument);
  bad_labels.assign(20, 0.5f);  // not an integer
  Dataset dh = Dataset::from_arrays(t.x.data(), DType::F32, {20, 3}, bad_labels.data(), DType::F32, {20});
  EXPECT_EQ(test::status_of([&] { m.fit(dh, FitOptions{}, nullptr, nullptr); }), Status::InvalidArgument);
  FitOptions bad;
  bad.epochs = 0;
  EXPECT_EQ(test::status_of([&] { m.fit(d, bad, nullptr, nullptr); }), Status::InvalidArgument);
  bad = FitOptions{};
  bad.resume_from = "/dev/null";  // exists, and is not a checkpoint
  EXPECT_EQ(test::status_of([&] { m.fit(d, bad, nullptr, nullptr); }), Status::Corrupt);
  Dataset tiny = d.take(3);
  tiny.batch(4, true);  // no complete batch
  EXPECT_EQ(test::status_of([&] { m.fit(tiny, FitOptions{}, nullptr, nullptr); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { m.set_weights(std::vector<float>(3)); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { Model::sequential(Strategy::default_strategy(), {0}); }), Status::InvalidArgument);
  EXPECT_EQ(Strategy::mirrored({"cpu", "cpu", "cpu"}).num_replicas(), 3);
  EXPECT_EQ(test::status_of([&] { Strategy::mirrored({"cuda:0"}); }), Status::Device);
  EXPECT_EQ(test::status_of([&] { Strategy::mirrored({"tpu"}); }), Status::InvalidArgument);
}

TEST(Model, JsonRoundTripsTheArchitecture) {
  Model m = Model::sequential(Strategy::default_strategy(), {28, 28});
  m.add_flatten();
  m.add_dense(64, Activation::Relu);
  m.add_dropout(0.5f);
  m.add_dense(10, Activation::Softmax);
  const std::string text = m.to_json();
  Model copy = Model::from_json(Strategy::default_strategy(), text);
  EXPECT_EQ(copy.to_json(), text);
  EXPECT_EQ(copy.num_params(), m.num_params());
  EXPECT_NE(text.find("\"dense_1\""), std::string::npos);
  EXPECT_EQ(test::status_of([&] { Model::from_json(Strategy::default_strategy(), "{\"class_name\": \"Sequential\"}"); }),
            Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] {
              Model::from_json(Strategy::default_strategy(),
                               R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer",)"
                               R"("config":{"batch_shape":[null,4]}},{"class_name":"Conv2D","config":{}}]}})");
            }),
            Status::InvalidArgument);  // no filters
  EXPECT_EQ(test::status_of([&] {
              Model::from_json(Strategy::default_strategy(),
                               R"({"class_name":"Sequential","config":{"layers":[{"class_name":"InputLayer",)"
                               R"("config":{"batch_shape":[null,8,8,1]}},{"class_name":"Conv2D","config":)"
                               R"({"filters":2,"kernel_size":[3,3],"strides":[1,2]}}]}})");
            }),
            Status::Unsupported);  // different strides along height and width
  // A CNN round-trips through JSON.
  Model cnn = Model::sequential(Strategy::default_strategy(), {12, 10, 3});
  cnn.add_conv2d(4, 3, 2, 2, Padding::Same, Activation::Relu);
  cnn.add_max_pool2d(2, 2);
  cnn.add_flatten();
  cnn.add_dense(5, Activation::Softmax);
  const Model again = Model::from_json(Strategy::default_strategy(), cnn.to_json());
  EXPECT_EQ(again.to_json(), cnn.to_json());
  EXPECT_EQ(again.num_params(), cnn.num_params());
  EXPECT_EQ(again.output_shape(), Shape({5}));
}

TEST(Model, NormalizationKeepsItsStatisticsThroughJsonWeightsAndTraining) {
  const FeatureMoments stats{{0.1f, -0.2f, 0.3f}, {1.0f, 4.0f, 0.25f}};
  auto build = [&] {
    Model m = Model::sequential(Strategy::default_strategy(), {4, 4, 3});
    m.add_normalization(stats);
    m.add_flatten();
    m.add_dense(2, Activation::Softmax);
    return m;
  };
  Model m = build();
  EXPECT_EQ(m.num_params(), 6 + 48 * 2 + 2);
  EXPECT_EQ(m.num_trainable_params(), 48 * 2 + 2);
  const std::string text = m.to_json();
  EXPECT_NE(text.find("\"class_name\": \"Normalization\""), std::string::npos) << text;
  Model copy = Model::from_json(Strategy::default_strategy(), text);
  EXPECT_EQ(copy.to_json(), text);
  // Compiled, the statistics are the first weights; training leaves them as they are.
  m.compile(CompileOptions{});
  copy.compile(CompileOptions{});
  const std::vector<float> expected = {0.1f, -0.2f, 0.3f, 1.0f, 4.0f, 0.25f};
  const std::vector<float> before = m.get_weights();
  EXPECT_EQ(std::vector<float>(before.begin(), before.begin() + 6), expected);
  EXPECT_EQ(copy.get_weights(), before);
  const std::vector<float> x = test::random_floats(64 * 48, 3);
  std::vector<float> y(64);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 2);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {64, 4, 4, 3}, y.data(), DType::F32, {64});
  d.batch(16, false);
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  const std::vector<float> after = m.get_weights();
  EXPECT_EQ(std::vector<float>(after.begin(), after.begin() + 6), expected);
  EXPECT_NE(after, before);  // the Dense layer did train
}

TEST(ProgressBar, FormatsLinesAsKerasDoes) {
  const core::Metrics m = {{"accuracy", 0.88841}, {"loss", 0.38304}, {"val_accuracy", 0.9574}, {"val_loss", 0.1361}};
  EXPECT_EQ(core::ProgressBar::format_line(1, false, 1563, 1563, 7.2, 7.2 / 1563, m),
            "1563/1563 \u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501"
            "\u2501\u2501\u2501\u2501 7s 5ms/step - accuracy: 0.8884 - loss: 0.3830 - val_accuracy: 0.9574 - "
            "val_loss: 0.1361");
  EXPECT_EQ(core::ProgressBar::format_line(2, false, 100, 100, 0.05, 0.05 / 100, {{"loss", 1.0}}),
            "100/100 - 0s - 500us/step - loss: 1.0000");
  const std::string running = core::ProgressBar::format_line(1, false, 5, 100, 1.0, 0.2, {{"loss", 1.0}});
  EXPECT_EQ(running, "  5/100 \u2501" + std::string(19, ' ') + " 19s 200ms/step - loss: 1.0000");  // 1 of 20 done
}

TEST(FashionMnist, MlpReachesKerasAccuracyOnASubset) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist missing";
  Dataset all = Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  Dataset train = all.take(12000);
  train.shuffle(12000, 1);
  train.batch(32, false);
  Dataset test = Dataset::from_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  test.batch(500, false);
  Model m = Model::sequential(Strategy::default_strategy(), {28, 28});
  m.add_flatten();
  m.add_dense(256, Activation::Relu);
  m.add_dense(256, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  m.compile(co);
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(m.fit(train, fo, nullptr, nullptr), Status::Ok);
  EXPECT_GT(m.evaluate(test).accuracy, 0.80);  // 12k of the 60k images; the full set reaches ~0.86
}

}  // namespace
}  // namespace kx
