// LeakyReLU (keras.layers.LeakyReLU): forward against a float64 reference and backward against finite
// differences, Keras's JSON config both ways (Keras 3's negative_slope, Keras 2's alpha), what it
// refuses, and a model with it trained on two CPU replicas equal to one.
#include <gtest/gtest.h>

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

TEST(LeakyReluLayer, MatchesTheReferenceAndFiniteDifferences) {
  for (const char* config : {"", R"({"negative_slope": 0.1})"}) {
    SCOPED_TRACE(config);
    LayerSpec spec = test::spec_of(LayerKind::LeakyReLU, "leaky_re_lu");
    spec.config = config;
    const double slope = std::string(config).empty() ? 0.3 : 0.1;  // Keras 3's default is 0.3
    auto layer = core::make_layer(spec);
    test::check_layer(*layer, {{2, 5}}, 3, {}, [&](const std::vector<Vec>& x, const Vec&) {
      Vec y = x[0];
      for (double& v : y) v = v > 0 ? v : slope * v;
      return y;
    });
  }
}

TEST(LeakyReluLayer, ReadsAndWritesKerasConfig) {
  for (const char* keras : {R"({"class_name": "LeakyReLU", "config": {"name": "leaky_re_lu", "negative_slope": 0.2}})",
                            R"({"class_name": "LeakyReLU", "config": {"name": "leaky_re_lu", "alpha": 0.2}})"}) {
    SCOPED_TRACE(keras);
    const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
    EXPECT_EQ(spec.kind, LayerKind::LeakyReLU);
    auto layer = core::make_layer(spec);
    layer->build({4});
    const json::Value out = layer->to_json();
    EXPECT_EQ(out.at("class_name", "").as_string(""), "LeakyReLU");
    EXPECT_EQ(out.at("config", "").at("negative_slope", "").as_number(""), 0.2);
    EXPECT_EQ(core::layer_spec_from_json(out).kind, LayerKind::LeakyReLU);
  }
}

TEST(LeakyReluLayer, RefusesANegativeOrMissingNumber) {
  const auto status = [](const std::string& config) {
    return test::status_of([&] {
      core::make_layer(core::layer_spec_from_json(json::parse(R"({"class_name": "LeakyReLU", "config": )" + config + "}")));
    });
  };
  EXPECT_EQ(status(R"({"negative_slope": -0.1})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"negative_slope": "x"})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"negative_slope": 0.01})"), Status::Ok);
}

const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "Dense", "config": {"units": 8}})",
    R"({"class_name": "LeakyReLU", "config": {"negative_slope": 0.1}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

std::vector<float> trained_weights(int replicas) {
  return test::weights_after_training({6}, kTrainedLayers, replicas);
}

TEST(LeakyReluLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = trained_weights(1), two = trained_weights(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
