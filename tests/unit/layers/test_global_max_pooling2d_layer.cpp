// GlobalMaxPooling2D (keras.layers.GlobalMaxPooling2D): forward against a float64 reference and
// backward against finite differences, with and without keepdims, Keras's JSON config both ways, what
// it refuses, and MobileNetV2's pooling "max" built with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/applications.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

TEST(GlobalMaxPooling2dLayer, MatchesTheReferenceAndFiniteDifferences) {
  for (const char* config : {"", R"({"keepdims": true})"}) {
    SCOPED_TRACE(config);
    LayerSpec spec = test::spec_of(LayerKind::GlobalMaxPooling2D, "global_max_pooling2d");
    spec.config = config;
    auto layer = core::make_layer(spec);
    const int64_t h = 4, w = 3, c = 5;
    test::check_layer(*layer, {{h, w, c}}, 2, {}, [&](const std::vector<Vec>& x, const Vec&) {
      const Vec& in = x[0];
      const size_t rows = in.size() / static_cast<size_t>(h * w * c);
      Vec y(rows * static_cast<size_t>(c), -std::numeric_limits<double>::infinity());
      for (size_t r = 0; r < rows; ++r)
        for (int64_t p = 0; p < h * w; ++p)
          for (int64_t k = 0; k < c; ++k) {
            double& m = y[r * static_cast<size_t>(c) + static_cast<size_t>(k)];
            m = std::max(m, in[(r * static_cast<size_t>(h * w) + static_cast<size_t>(p)) * static_cast<size_t>(c) +
                               static_cast<size_t>(k)]);
          }
      return y;
    });
  }
}

TEST(GlobalMaxPooling2dLayer, ReadsAndWritesKerasConfigAndItsShapes) {
  const std::string keras = R"({"class_name": "GlobalMaxPooling2D", "config": {"name": "gmp",
      "data_format": "channels_last", "keepdims": true}})";
  const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
  EXPECT_EQ(spec.kind, LayerKind::GlobalMaxPooling2D);
  auto layer = core::make_layer(spec);
  EXPECT_EQ(layer->build({6, 5, 7}), (Shape{1, 1, 7}));
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("class_name", "").as_string(""), "GlobalMaxPooling2D");
  EXPECT_TRUE(out.at("config", "").at("keepdims", "").as_bool(""));
  auto flat = core::make_layer(test::spec_of(LayerKind::GlobalMaxPooling2D, "g"));
  EXPECT_EQ(flat->build({6, 5, 7}), (Shape{7}));
  EXPECT_EQ(test::status_of([&] { flat->build({6, 7}); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] {
              core::make_layer(core::layer_spec_from_json(json::parse(
                  R"({"class_name": "GlobalMaxPooling2D", "config": {"data_format": "channels_first"}})")));
            }),
            Status::Unsupported);
}

TEST(GlobalMaxPooling2dLayer, MobileNetV2PoolsByTheMaximum) {
  applications::MobileNetV2Options o;
  o.input_shape = {32, 32, 3};
  o.alpha = 0.35;
  o.include_top = false;
  o.pooling = "max";
  Model m = applications::mobilenet_v2(Strategy::mirrored({"cpu"}), o);
  const std::vector<std::string> names = m.layer_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "global_max_pooling2d");
}

}  // namespace
}  // namespace kx
