// ReLU (keras.layers.ReLU): forward against a float64 reference and backward against finite
// differences, Keras's JSON config both ways, the settings it refuses, and a model with it trained on
// two CPU replicas equal to one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

// keras.activations.relu in float64: where(x > threshold, x, 0) (relu without a threshold), capped,
// minus slope * relu(threshold - x); leaky_relu when only the slope is set.
double keras_relu(double x, double slope, double max_value, double threshold) {
  if (slope != 0 && std::isinf(max_value) && threshold == 0) return x > 0 ? x : x * slope;
  double y = x > threshold ? x : 0.0;
  y = std::min(y, max_value);
  return slope != 0 ? y - slope * std::max(threshold - x, 0.0) : y;
}

TEST(ReluLayer, KerasSettingsMatchTheReferenceAndFiniteDifferences) {
  struct Setting {
    const char* config;
    double slope, max_value, threshold;
  };
  const double none = std::numeric_limits<double>::infinity();
  // Caps and thresholds inside the inputs' range [-1, 1], so that every piece is reached.
  for (const Setting& s : {Setting{R"({"max_value": 0.6})", 0, 0.6, 0},
                           Setting{R"({"negative_slope": 0.2})", 0.2, none, 0},
                           Setting{R"({"negative_slope": 0.3, "max_value": 0.5})", 0.3, 0.5, 0},
                           Setting{R"({"threshold": 0.25})", 0, none, 0.25},
                           Setting{R"({"negative_slope": 0.1, "max_value": 0.7, "threshold": -0.0})", 0.1, 0.7, 0},
                           Setting{R"({"negative_slope": 0.15, "max_value": 0.8, "threshold": 0.3})", 0.15, 0.8, 0.3}}) {
    SCOPED_TRACE(s.config);
    LayerSpec spec = test::spec_of(LayerKind::ReLU, "relu");
    spec.config = s.config;
    auto layer = core::make_layer(spec);
    EXPECT_EQ(layer->output_activation(), Activation::None);
    test::check_layer(*layer, {{3, 7}}, 4, {}, [&](const std::vector<Vec>& x, const Vec&) {
      Vec y = x[0];
      for (double& v : y) v = keras_relu(v, s.slope, s.max_value, s.threshold);
      return y;
    });
  }
}

TEST(ReluLayer, Relu6KeepsNaNAndTheThresholdMapsItToZeroAsKerasDoes) {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {4});
  m.add_layer(R"({"class_name": "ReLU", "config": {"max_value": 6.0}})");
  m.add_layer(R"({"class_name": "ReLU", "config": {"threshold": 1.0}})");
  m.compile({});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{-1.0f, 3.0f, 9.0f, nan};
  const std::vector<float> y = m.predict(x.data(), 1);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[2], 6.0f);
  EXPECT_EQ(y[3], 0.0f);  // relu6 keeps the NaN; where(NaN > 1, NaN, 0) is 0
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

TEST(ReluLayer, RefusesWhatKerasRefuses) {
  const auto status = [](const std::string& config) {
    return test::status_of([&] {
      core::make_layer(core::layer_spec_from_json(json::parse(R"({"class_name": "ReLU", "config": )" + config + "}")));
    });
  };
  EXPECT_EQ(status(R"({"max_value": -1})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"negative_slope": "x"})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"threshold": -0.5})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"max_value": 6})"), Status::Ok);
  EXPECT_EQ(status(R"({"negative_slope": 0.1, "threshold": 0.5, "max_value": 2})"), Status::Ok);
  EXPECT_EQ(status(R"({})"), Status::Ok);
}

const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "Dense", "config": {"units": 8}})",
    R"({"class_name": "ReLU", "config": {}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

std::vector<float> trained_weights(int replicas) {
  return test::weights_after_training({6}, kTrainedLayers, replicas);
}

TEST(ReluLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = trained_weights(1), two = trained_weights(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
