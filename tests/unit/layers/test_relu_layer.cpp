// ReLU (keras.layers.ReLU): forward against a float64 reference and backward against finite
// differences, Keras's JSON config both ways, the settings it refuses, and a model with it trained on
// two CPU replicas equal to one.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

TEST(ReluLayer, MatchesTheReferenceAndFiniteDifferences) {
  auto layer = core::make_layer(test::spec_of(LayerKind::ReLU, "relu"));
  const int64_t rows = 3;
  test::check_layer(*layer, {{2, 5}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y = x[0];
    for (double& v : y) v = std::max(v, 0.0);
    return y;
  });
}

TEST(ReluLayer, ReadsAndWritesKerasConfig) {
  // As Keras 3 writes keras.layers.ReLU() (dtype policy left out: kx ignores keys it does not use).
  const std::string keras = R"({"class_name": "ReLU", "config": {"name": "re_lu", "trainable": true,
      "max_value": null, "negative_slope": 0.0, "threshold": 0.0}})";
  const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
  EXPECT_EQ(spec.kind, LayerKind::ReLU);
  auto layer = core::make_layer(spec);
  layer->build({4});
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("class_name", "").as_string(""), "ReLU");
  const json::Value& config = out.at("config", "");
  EXPECT_TRUE(config.at("max_value", "").is_null());
  EXPECT_EQ(config.at("negative_slope", "").as_number(""), 0.0);
  EXPECT_EQ(config.at("threshold", "").as_number(""), 0.0);
  EXPECT_EQ(core::layer_spec_from_json(out).kind, LayerKind::ReLU);
}

TEST(ReluLayer, RefusesWhatKerasRefusesAndSaysWhatKxLacks) {
  const auto status = [](const std::string& config) {
    return test::status_of([&] {
      core::make_layer(core::layer_spec_from_json(json::parse(R"({"class_name": "ReLU", "config": )" + config + "}")));
    });
  };
  EXPECT_EQ(status(R"({"max_value": -1})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"negative_slope": "x"})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"threshold": -0.5})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"max_value": 6})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"negative_slope": 0.1})"), Status::Unsupported);
  EXPECT_EQ(status(R"({})"), Status::Ok);
}

std::vector<float> trained_weights(int replicas) {
  Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")), {6});
  m.add_layer(R"({"class_name": "Dense", "config": {"units": 8}})");
  m.add_layer(R"({"class_name": "ReLU", "config": {}})");
  m.add_layer(R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})");
  CompileOptions o;
  o.seed = 7;
  m.compile(o);
  const std::vector<float> x = test::random_floats(32 * 6, 3);
  std::vector<float> y(32);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  for (int step = 0; step < 5; ++step) m.train_on_batch(x.data(), y.data(), 32);
  return m.get_weights();
}

TEST(ReluLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = trained_weights(1), two = trained_weights(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
