// Rescaling (keras.layers.Rescaling): forward against float64 and backward against finite
// differences, Keras's JSON config both ways, and what it refuses.
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

TEST(RescalingLayer, MatchesTheReferenceAndFiniteDifferences) {
  LayerSpec spec = test::spec_of(LayerKind::Rescaling, "rescaling");
  spec.config = R"({"scale": 0.00784313725490196, "offset": -1.0})";
  auto layer = core::make_layer(spec);
  test::check_layer(*layer, {{2, 3, 2}}, 3, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y = x[0];
    for (double& v : y) v = v * 0.00784313725490196 - 1.0;
    return y;
  });
}

TEST(RescalingLayer, ReadsAndWritesKerasConfig) {
  const std::string keras = R"({"class_name": "Rescaling", "config": {"name": "rescaling", "trainable": true,
      "scale": 0.00392156862745098, "offset": 0.0}})";
  const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
  EXPECT_EQ(spec.kind, LayerKind::Rescaling);
  auto layer = core::make_layer(spec);
  EXPECT_EQ(layer->build({4, 4, 3}), (Shape{4, 4, 3}));
  const json::Value out = layer->to_json();
  EXPECT_DOUBLE_EQ(out.at("config", "").at("scale", "").as_number(""), 0.00392156862745098);
  EXPECT_DOUBLE_EQ(out.at("config", "").at("offset", "").as_number(""), 0.0);
  EXPECT_EQ(core::layer_spec_from_json(out).kind, LayerKind::Rescaling);
}

TEST(RescalingLayer, PerChannelMatchesTheReferenceAndFiniteDifferences) {
  // EfficientNet's Rescaling with ImageNet weights: 1 / sqrt(stddev) per colour, here with offsets too.
  const std::vector<double> scale{1 / std::sqrt(0.229), 1 / std::sqrt(0.224), 1 / std::sqrt(0.225)};
  const std::vector<double> offset{0.5, -1.0, 0.25};
  LayerSpec spec = test::spec_of(LayerKind::Rescaling, "rescaling");
  spec.config = json::Value(json::Value::Object{{"scale", json::Value(json::Value::Array{json::Value(scale[0]),
                                                 json::Value(scale[1]), json::Value(scale[2])})},
                                                {"offset", json::Value(json::Value::Array{json::Value(offset[0]),
                                                 json::Value(offset[1]), json::Value(offset[2])})}})
                    .dump();
  auto layer = core::make_layer(spec);
  test::check_layer(*layer, {{2, 4, 3}}, 3, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y = x[0];
    for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] * scale[i % 3] + offset[i % 3];
    return y;
  });
  // A list for one of them, a number for the other.
  spec.config = R"({"scale": 0.5, "offset": [1, 2]})";
  auto mixed = core::make_layer(spec);
  test::check_layer(*mixed, {{3, 2}}, 2, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y = x[0];
    for (size_t i = 0; i < y.size(); ++i) y[i] = y[i] * 0.5 + static_cast<double>(1 + i % 2);
    return y;
  });
}

TEST(RescalingLayer, ReadsAndWritesKerasListsAndArrays) {
  // Keras writes a list as a list and a NumPy array as "__numpy__"; kx writes both back as lists.
  for (const char* scale : {R"([0.5, 0.25, 2.0])",
                            R"({"class_name": "__numpy__", "config": {"value": [0.5, 0.25, 2.0], "dtype": "float32"}})"}) {
    const std::string keras = std::string(R"({"class_name": "Rescaling", "config": {"name": "r", "scale": )") + scale +
                              R"(, "offset": [1.0, 2.0, 3.0]}})";
    auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
    EXPECT_EQ(layer->build({4, 4, 3}), (Shape{4, 4, 3}));
    const json::Value out = layer->to_json();
    EXPECT_EQ(out.at("config", "").at("scale", "").dump(), "[0.5, 0.25, 2]");
    EXPECT_EQ(out.at("config", "").at("offset", "").dump(), "[1, 2, 3]");
    auto again = core::make_layer(core::layer_spec_from_json(out));
    EXPECT_EQ(again->to_json().dump(), out.dump());
  }
}

TEST(RescalingLayer, RefusesWhatIsNotANumberOrAListOfThem) {
  const auto status = [](const std::string& config, Shape in = {4, 3}) {
    return test::status_of([&] {
      core::make_layer(core::layer_spec_from_json(json::parse(R"({"class_name": "Rescaling", "config": )" + config + "}")))
          ->build(in);
    });
  };
  EXPECT_EQ(status(R"({})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": [0.5, 0.25, 2.0]})"), Status::Ok);
  EXPECT_EQ(status(R"({"scale": [0.5, 0.25]})"), Status::InvalidArgument);  // 2 values for 3 channels
  EXPECT_EQ(status(R"({"scale": 1, "offset": [1, 2, 3, 4]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": []})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": [[0.5, 0.25, 2.0]]})"), Status::Unsupported);  // broadcast over two axes
  EXPECT_EQ(status(R"({"scale": "half"})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"scale": [1, 1e999, 1]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": 2, "offset": 1e999})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": 2})"), Status::Ok);
}

}  // namespace
}  // namespace kx
