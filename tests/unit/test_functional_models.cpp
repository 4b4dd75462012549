// Functional models: gradients through a graph whose tensors have several readers, Keras's JSON
// configs both ways, frozen layers, weights loaded by name, and the ResNet50 builder.
#include <gtest/gtest.h>

#include <filesystem>

#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

LayerSpec dense(const char* name, int64_t units, Activation act = Activation::None) {
  LayerSpec s;
  s.kind = LayerKind::Dense;
  s.name = name;
  s.units = units;
  s.activation = act;
  return s;
}

LayerSpec of_kind(LayerKind kind, const char* name) {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  return s;
}

// x -> d1 -> d2; sum = d1 + d2; cat = [sum, d1]; out = Dense(cat). d1 has three readers.
Model branching_model(int64_t in) {
  Model m = Model::functional(Strategy::default_strategy(), {in}, "x");
  m.add(dense("d1", 4, Activation::Tanh), {"x"});
  m.add(dense("d2", 4, Activation::Tanh), {"d1"});
  m.add(of_kind(LayerKind::Add, "sum"), {"d1", "d2"});
  m.add(of_kind(LayerKind::Concatenate, "cat"), {"sum", "d1"});
  m.add(dense("out", 3), {"cat"});
  return m;
}

TEST(FunctionalModel, OneSgdStepEqualsMinusTheFiniteDifferenceGradient) {
  const int64_t rows = 5, in = 6;
  Model m = branching_model(in);
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = 1.0;
  co.loss = {LossKind::MeanSquaredError, false};
  m.compile(co);
  const std::vector<float> x = test::random_floats(rows * in, 3), y = test::random_floats(rows * 3, 4);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {rows, in}, y.data(), DType::F32, {rows, 3});
  d.batch(rows, false);
  const std::vector<float> w0 = m.get_weights();
  FitOptions fo;
  fo.steps_per_epoch = 1;
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  const std::vector<float> w1 = m.get_weights();

  auto loss = [&](const Vec& w) {
    size_t at = 0;
    auto take = [&](int64_t n) {
      Vec v(w.begin() + static_cast<long>(at), w.begin() + static_cast<long>(at + n));
      at += static_cast<size_t>(n);
      return v;
    };
    const Vec W1 = take(in * 4), b1 = take(4), W2 = take(16), b2 = take(4), W3 = take(24), b3 = take(3);
    const Vec d1 = test::dense_forward(Vec(x.begin(), x.end()), W1, b1, rows, in, 4, Activation::Tanh);
    const Vec d2 = test::dense_forward(d1, W2, b2, rows, 4, 4, Activation::Tanh);
    Vec cat;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < 4; ++k) cat.push_back(d1[static_cast<size_t>(r * 4 + k)] + d2[static_cast<size_t>(r * 4 + k)]);
      for (int64_t k = 0; k < 4; ++k) cat.push_back(d1[static_cast<size_t>(r * 4 + k)]);
    }
    const Vec o = test::dense_forward(cat, W3, b3, rows, 8, 3, Activation::None);
    double total = 0;
    for (size_t i = 0; i < o.size(); ++i) total += (o[i] - y[i]) * (o[i] - y[i]) / 3;
    return total / rows;
  };
  const Vec g = test::numeric_gradient(loss, Vec(w0.begin(), w0.end()));
  std::vector<double> step(w0.size());
  for (size_t i = 0; i < w0.size(); ++i) step[i] = static_cast<double>(w0[i]) - w1[i];
  EXPECT_EQ(test::first_mismatch(step, g, g.size(), 2e-4), -1);
}

TEST(FunctionalModel, JsonRoundTripsAndSequentialChainsStaySequential) {
  Model m = branching_model(6);
  const std::string json = m.to_json();
  EXPECT_NE(json.find("\"class_name\": \"Functional\""), std::string::npos) << json;
  Model back = Model::from_json(Strategy::default_strategy(), json);
  EXPECT_EQ(back.to_json(), json);
  EXPECT_EQ(back.num_params(), m.num_params());

  Model seq = Model::sequential(Strategy::default_strategy(), {4});
  seq.add_dense(3);
  EXPECT_NE(seq.to_json().find("\"class_name\": \"Sequential\""), std::string::npos);
}

TEST(FunctionalModel, ReadsKeras3Configs) {
  // As Keras 3's model.to_json() writes a small residual model (trimmed to what kx reads).
  const std::string keras3 = R"({"class_name": "Functional", "config": {"name": "functional", "layers": [
    {"class_name": "InputLayer", "name": "inp", "config": {"batch_shape": [null, 8, 8, 3], "dtype": "float32", "name": "inp"}, "inbound_nodes": []},
    {"class_name": "Conv2D", "name": "c1", "config": {"name": "c1", "trainable": true, "filters": 4, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "activation": "relu", "use_bias": true},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 8, 8, 3], "dtype": "float32", "keras_history": ["inp", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "BatchNormalization", "name": "bn", "config": {"name": "bn", "trainable": false, "axis": 3, "momentum": 0.9, "epsilon": 0.001, "center": true, "scale": true},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 8, 8, 4], "dtype": "float32", "keras_history": ["c1", 0, 0]}}], "kwargs": {"training": false}}]},
    {"class_name": "Conv2D", "name": "c2", "config": {"name": "c2", "filters": 4, "kernel_size": [1, 1], "activation": "linear"},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 8, 8, 4], "dtype": "float32", "keras_history": ["bn", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "Add", "name": "add", "config": {"name": "add"},
     "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__", "config": {"keras_history": ["c2", 0, 0]}}, {"class_name": "__keras_tensor__", "config": {"keras_history": ["c1", 0, 0]}}]], "kwargs": {}}]},
    {"class_name": "GlobalAveragePooling2D", "name": "gap", "config": {"name": "gap", "keepdims": false},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["add", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "Dense", "name": "top", "config": {"name": "top", "units": 2, "activation": "softmax"},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["gap", 0, 0]}}], "kwargs": {}}]}
  ], "input_layers": [["inp", 0, 0]], "output_layers": ["top", 0, 0]}})";
  Model m = Model::from_json(Strategy::default_strategy(), keras3);
  EXPECT_EQ(m.layer_names(), (std::vector<std::string>{"c1", "bn", "c2", "add", "gap", "top"}));
  EXPECT_EQ(m.output_shape(), Shape({2}));
  EXPECT_EQ(m.num_params(), (27 * 4 + 4) + 4 * 4 + (4 * 4 + 4) + (4 * 2 + 2));
  EXPECT_FALSE(m.trainable("bn"));
  EXPECT_EQ(m.num_trainable_params(), m.num_params() - 4 * 4);
}

TEST(FunctionalModel, RejectsBrokenGraphs) {
  const Strategy s = Strategy::default_strategy();
  Model m = Model::functional(s, {4}, "x");
  EXPECT_EQ(test::status_of([&] { m.add(dense("a", 2), {"nope"}); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { m.add(dense("x", 2), {"x"}); }), Status::InvalidArgument);  // the input's name
  m.add(dense("a", 2), {"x"});
  m.add(dense("b", 2), {"x"});  // a leads nowhere: b is the output
  CompileOptions co;
  co.loss = {LossKind::MeanSquaredError, false};
  EXPECT_EQ(test::status_of([&] { m.compile(co); }), Status::InvalidArgument);

  auto config = [](const std::string& layers, const std::string& outputs) {
    return R"({"class_name": "Functional", "config": {"layers": [{"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [null, 3]}, "inbound_nodes": []},)" +
           layers + R"(], "output_layers": )" + outputs + "}}";
  };
  const std::string a_from_b = R"({"class_name": "Dense", "name": "a", "config": {"units": 3}, "inbound_nodes": [[["b", 0, 0, {}]]]})";
  const std::string b_from_a = R"({"class_name": "Dense", "name": "b", "config": {"units": 3}, "inbound_nodes": [[["a", 0, 0, {}]]]})";
  const std::string a_from_x = R"({"class_name": "Dense", "name": "a", "config": {"units": 3}, "inbound_nodes": [[["x", 0, 0, {}]]]})";
  const std::string shared = R"({"class_name": "Dense", "name": "a", "config": {"units": 3}, "inbound_nodes": [[["x", 0, 0, {}]], [["x", 0, 0, {}]]]})";
  EXPECT_EQ(test::status_of([&] { Model::from_json(s, config(a_from_b + "," + b_from_a, R"([["b", 0, 0]])")); }),
            Status::InvalidArgument);  // a cycle
  EXPECT_EQ(test::status_of([&] { Model::from_json(s, config(a_from_x + "," + b_from_a, R"([["b", 0, 0], ["a", 0, 0]])")); }),
            Status::Unsupported);  // two outputs
  EXPECT_EQ(test::status_of([&] { Model::from_json(s, config(shared, R"([["a", 0, 0]])")); }), Status::Unsupported);
  EXPECT_EQ(test::status_of([&] { Model::from_json(s, config(a_from_x + "," + b_from_a, R"([["a", 0, 0]])")); }),
            Status::InvalidArgument);  // b does not lead to the output
  EXPECT_NO_THROW(Model::from_json(s, config(b_from_a + "," + a_from_x, R"([["b", 0, 0]])")));  // any listing order
}

Model small_cnn(const Strategy& s, bool batch_norm, int64_t classes) {
  Model m = Model::sequential(s, {6, 6, 2});
  m.add_conv2d(4, 3, 3, 1, Padding::Same, Activation::None);
  if (batch_norm) m.add(of_kind(LayerKind::BatchNormalization, "bn"));
  LayerSpec relu = of_kind(LayerKind::Activation, "relu");
  relu.activation = Activation::Relu;
  m.add(relu);
  m.add(of_kind(LayerKind::GlobalAveragePooling2D, "gap"));
  LayerSpec top = dense("top", classes, Activation::Softmax);
  m.add(top);
  CompileOptions co;
  co.optimizer.learning_rate = 0.05;
  m.compile(co);
  return m;
}

Dataset random_images(int64_t n, int64_t classes, uint32_t seed) {
  std::vector<float> x = test::random_floats(n * 72, seed), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % classes);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 6, 6, 2}, y.data(), DType::F32, {n});
  d.batch(8, false);
  return d;
}

TEST(TrainableFlag, FrozenLayersKeepTheirWeightsAndMovingStatistics) {
  Model m = small_cnn(Strategy::default_strategy(), true, 3);
  const int64_t conv = 3 * 3 * 2 * 4 + 4, bn = 4 * 4;
  EXPECT_EQ(m.num_trainable_params(), m.num_params() - 8);  // the moving statistics
  m.set_trainable("conv2d", false);
  m.set_trainable("bn", false);
  EXPECT_FALSE(m.trainable("conv2d"));
  EXPECT_EQ(m.num_trainable_params(), m.num_params() - conv - bn);
  EXPECT_EQ(test::status_of([&] { m.set_trainable("nope", false); }), Status::InvalidArgument);
  Dataset d = random_images(32, 3, 8);
  const std::vector<float> w0 = m.get_weights();
  FitOptions fo;
  fo.epochs = 2;
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  const std::vector<float> w1 = m.get_weights();
  for (int64_t i = 0; i < conv + bn; ++i) EXPECT_EQ(w0[i], w1[i]) << "frozen weight " << i;
  bool top_moved = false;
  for (size_t i = static_cast<size_t>(conv + bn); i < w0.size(); ++i) top_moved = top_moved || w0[i] != w1[i];
  EXPECT_TRUE(top_moved);

  // Unfrozen, the batch-normalisation statistics follow the data.
  m.set_trainable("bn", true);
  ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  const std::vector<float> w2 = m.get_weights();
  for (int64_t i = 0; i < conv; ++i) EXPECT_EQ(w1[i], w2[i]);
  EXPECT_NE(w1[conv + 2 * 4], w2[conv + 2 * 4]) << "moving mean";
  EXPECT_NE(w1[conv + 3 * 4], w2[conv + 3 * 4]) << "moving variance";
}

TEST(TrainableFlag, BatchNormReplicasStayEqualAndAverageTheirStatistics) {
  // Two CPU replicas each normalise their half of the batch; the moving statistics they keep are
  // the mean of the two halves' (equal halves: the batch mean, for the moving mean).
  Model one = small_cnn(Strategy::default_strategy(), true, 3);
  Model two = small_cnn(Strategy::mirrored({"cpu", "cpu"}), true, 3);
  Dataset d = random_images(16, 3, 9);
  d.batch(16, false);
  FitOptions fo;
  fo.steps_per_epoch = 1;
  const std::vector<float> w0 = one.get_weights();
  ASSERT_EQ(one.fit(d, fo, nullptr, nullptr), Status::Ok);
  ASSERT_EQ(two.fit(d, fo, nullptr, nullptr), Status::Ok);
  const std::vector<float> a = one.get_weights(), b = two.get_weights();
  const int64_t mean_at = 3 * 3 * 2 * 4 + 4 + 2 * 4;
  for (int64_t c = 0; c < 4; ++c)
    EXPECT_NEAR(a[mean_at + c], b[mean_at + c], 1e-6) << "moving mean of channel " << c;
  // The moving variance differs (mean of the halves' variances): it moved, from the same start.
  for (int64_t c = 0; c < 4; ++c) EXPECT_NE(b[mean_at + 4 + c], w0[mean_at + 4 + c]);
}

TEST(LoadWeights, ByNameSkippingOrRejectingMismatches) {
  const auto dir = std::filesystem::temp_directory_path() / "kx_load_weights";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "base.kx").string();
  Model source = small_cnn(Strategy::default_strategy(), true, 3);
  Dataset d = random_images(16, 3, 10);
  FitOptions fo;
  ASSERT_EQ(source.fit(d, fo, nullptr, nullptr), Status::Ok);
  source.save(path);
  const std::vector<float> ws = source.get_weights();

  Model target = small_cnn(Strategy::default_strategy(), true, 5);  // another head
  const std::vector<float> before = target.get_weights();
  EXPECT_EQ(test::status_of([&] { target.load_weights(path, false); }), Status::InvalidArgument);
  EXPECT_EQ(target.get_weights(), before) << "nothing loads when a mismatch is an error";
  const WeightsReport r = target.load_weights(path, true);
  EXPECT_EQ(r.loaded, 6);   // conv kernel and bias, four batch-normalisation weights
  EXPECT_EQ(r.skipped, 2);  // the head's kernel and bias
  const std::vector<float> after = target.get_weights();
  const size_t base = 3 * 3 * 2 * 4 + 4 + 16;
  for (size_t i = 0; i < base; ++i) EXPECT_EQ(after[i], ws[i]);
  for (size_t i = base; i < after.size(); ++i) EXPECT_EQ(after[i], before[i]);
  EXPECT_EQ(test::status_of([&] { target.load_weights((dir / "missing.kx").string(), true); }), Status::Io);
  std::filesystem::remove_all(dir);
}

TEST(ResNet50, HasKerasParameterCountsAndRoundTripsThroughJson) {
  const Strategy s = Strategy::default_strategy();
  Model top = applications::resnet50(s);
  EXPECT_EQ(top.num_params(), 25636712);
  EXPECT_EQ(top.num_trainable_params(), 25583592);  // Keras: 53,120 non-trainable
  EXPECT_EQ(top.output_shape(), Shape({1000}));
  Model base = applications::resnet50(s, {224, 224, 3}, false);
  EXPECT_EQ(base.num_params(), 23587712);
  EXPECT_EQ(base.output_shape(), Shape({7, 7, 2048}));
  const std::string json = top.to_json();
  Model back = Model::from_json(s, json);
  EXPECT_EQ(back.num_params(), top.num_params());
  EXPECT_EQ(back.to_json(), json);
  EXPECT_EQ(test::status_of([&] { applications::resnet50(s, {16, 16, 3}); }), Status::InvalidArgument);
}

TEST(ResNet50, AFewStepsOnRandomDataLowerTheLoss) {
  Model m = applications::resnet50(Strategy::default_strategy(), {32, 32, 3}, true, 4);
  CompileOptions co;
  co.optimizer.learning_rate = 1e-3;
  m.compile(co);
  const int64_t n = 8;
  std::vector<float> x = test::random_floats(n * 32 * 32 * 3, 12), y(n);
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 4);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 32, 32, 3}, y.data(), DType::F32, {n});
  d.batch(n, false);
  FitOptions fo;
  fo.epochs = 5;
  History h;
  ASSERT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
  EXPECT_LT(h.get("loss", 4), h.get("loss", 0));
}

}  // namespace
}  // namespace kx
