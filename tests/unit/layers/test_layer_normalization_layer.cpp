// LayerNormalization (keras.layers.LayerNormalization): forward against a float64 reference and
// backward against finite differences with and without gamma and beta, on vectors and sequences;
// Keras's JSON config both ways, what it refuses, and two CPU replicas training as one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

// Each row of `features` normalised: (x - mean) / sqrt(var + eps) * gamma + beta.
Vec reference(const Vec& x, const Vec& w, int64_t features, double eps, bool scale, bool center) {
  Vec y(x.size());
  const size_t rows = x.size() / static_cast<size_t>(features);
  const size_t F = static_cast<size_t>(features);
  for (size_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (size_t c = 0; c < F; ++c) m += x[r * F + c];
    m /= static_cast<double>(F);
    for (size_t c = 0; c < F; ++c) v += (x[r * F + c] - m) * (x[r * F + c] - m);
    v /= static_cast<double>(F);
    for (size_t c = 0; c < F; ++c) {
      double out = (x[r * F + c] - m) / std::sqrt(v + eps);
      if (scale) out *= w[c];
      if (center) out += w[(scale ? F : 0) + c];
      y[r * F + c] = out;
    }
  }
  return y;
}

TEST(LayerNormalizationLayer, MatchesTheReferenceAndFiniteDifferences) {
  struct Case {
    const char* config;
    Shape in;
    double eps;
    bool scale, center;
  };
  const Case cases[] = {
      {"{}", {7}, 1e-3, true, true},
      {R"({"epsilon": 1e-6})", {5, 6}, 1e-6, true, true},
      {R"({"axis": [-1], "center": false})", {3, 4, 5}, 1e-3, true, false},
      {R"({"axis": -1, "scale": false})", {4, 8}, 1e-3, false, true},
      {R"({"scale": false, "center": false})", {2, 9}, 1e-3, false, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.config);
    LayerSpec spec = test::spec_of(LayerKind::LayerNormalization, "ln");
    spec.config = k.config;
    auto layer = core::make_layer(spec);
    EXPECT_EQ(layer->build(k.in), k.in);
    const int64_t F = k.in.back();
    const size_t n = static_cast<size_t>((k.scale ? F : 0) + (k.center ? F : 0));
    ASSERT_EQ(layer->params().size(), (k.scale ? 1u : 0u) + (k.center ? 1u : 0u));
    if (k.scale) {
      EXPECT_EQ(layer->params()[0].name, "gamma");
    }
    std::vector<float> w = test::random_floats(n, 5, 0.5f, 1.5f);
    const int64_t rows = 3;
    test::check_layer(*layer, {k.in}, rows, w, [&](const std::vector<Vec>& x, const Vec& wd) {
      return reference(x[0], wd, F, static_cast<float>(k.eps), k.scale, k.center);
    });
  }
}

TEST(LayerNormalizationLayer, ReadsAndWritesKerasConfig) {
  // As Keras 3.15 writes keras.layers.LayerNormalization(epsilon=1e-6) (initializers left out).
  const std::string keras = R"({"class_name": "LayerNormalization", "config": {"name": "ln", "trainable": true,
      "axis": [-1], "epsilon": 1e-06, "center": true, "scale": true, "rms_scaling": false,
      "beta_regularizer": null, "gamma_regularizer": null}})";
  const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
  EXPECT_EQ(spec.kind, LayerKind::LayerNormalization);
  auto layer = core::make_layer(spec);
  EXPECT_EQ(layer->build({4, 8}), (Shape{4, 8}));
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("class_name", "").as_string(""), "LayerNormalization");
  const json::Value& config = out.at("config", "");
  EXPECT_DOUBLE_EQ(config.at("epsilon", "").as_number(""), 1e-6);
  EXPECT_TRUE(config.at("center", "").as_bool(""));
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({4, 8}), (Shape{4, 8}));
  ASSERT_EQ(again->params().size(), 2u);
  EXPECT_EQ(again->params()[1].name, "beta");
}

TEST(LayerNormalizationLayer, RefusesWhatItCannotDo) {
  const auto status = [](const std::string& config, const Shape& in = {4, 5}) {
    return test::status_of([&] {
      auto l = core::make_layer(
          core::layer_spec_from_json(json::parse(R"({"class_name": "LayerNormalization", "config": )" + config + "}")));
      l->build(in);
    });
  };
  EXPECT_EQ(status(R"({"epsilon": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"epsilon": -1})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"axis": 1})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"axis": [1, 2]})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"rms_scaling": true})"), Status::Unsupported);
  EXPECT_EQ(status(R"({})", {}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"axis": -1})"), Status::Ok);
}

const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "Dense", "config": {"units": 6, "activation": "relu"}})",
    R"({"class_name": "LayerNormalization", "config": {}})",
    R"({"class_name": "Flatten", "config": {}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

TEST(LayerNormalizationLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = test::weights_after_training({4, 5}, kTrainedLayers, 1);
  const std::vector<float> two = test::weights_after_training({4, 5}, kTrainedLayers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
