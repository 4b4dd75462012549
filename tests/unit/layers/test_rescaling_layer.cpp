// Rescaling (keras.layers.Rescaling): forward against float64 and backward against finite
// differences, Keras's JSON config both ways, and what it refuses.
#include <gtest/gtest.h>

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

TEST(RescalingLayer, RefusesListsAndWhatIsNotANumber) {
  const auto status = [](const std::string& config) {
    return test::status_of([&] {
      core::make_layer(core::layer_spec_from_json(json::parse(R"({"class_name": "Rescaling", "config": )" + config + "}")));
    });
  };
  EXPECT_EQ(status(R"({})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": [0.5, 0.25, 2.0]})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"scale": "half"})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"scale": 2, "offset": 1e999})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"scale": 2})"), Status::Ok);
}

}  // namespace
}  // namespace kx
