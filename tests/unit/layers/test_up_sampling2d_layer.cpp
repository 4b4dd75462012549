// UpSampling2D (keras.layers.UpSampling2D): nearest and TensorFlow's half-pixel bilinear against a
// float64 reference, backward against finite differences, Keras's JSON config both ways, what it
// refuses, and two CPU replicas training as one.
#include <gtest/gtest.h>

#include <algorithm>
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

std::unique_ptr<core::Layer> up_sampling(const std::string& config) {
  return core::make_layer(
      core::layer_spec_from_json(json::parse(R"({"class_name": "UpSampling2D", "config": )" + config + "}")));
}

// Along one axis of length n upsampled s times: output o reads input at (o + 0.5) / s - 0.5, between
// its two neighbours clamped to [0, n - 1] (tf.image.resize's bilinear), or at floor(o / s) (nearest).
struct Taps {
  int64_t lower, upper;
  double lerp;
};
Taps taps(int64_t o, int64_t n, int64_t s, bool bilinear) {
  if (!bilinear) return {o / s, o / s, 0.0};
  const double in = (static_cast<double>(o) + 0.5) / static_cast<double>(s) - 0.5;
  const double f = std::floor(in);
  return {std::max<int64_t>(static_cast<int64_t>(f), 0), std::min<int64_t>(static_cast<int64_t>(std::ceil(in)), n - 1),
          in - f};
}

Vec reference(int64_t rows, int64_t h, int64_t w, int64_t c, int64_t sh, int64_t sw, bool bilinear, const Vec& x) {
  const int64_t oh = h * sh, ow = w * sw;
  Vec y(static_cast<size_t>(rows * oh * ow * c));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t k = 0; k < c; ++k) {
          const Taps ty = taps(i, h, sh, bilinear), tx = taps(j, w, sw, bilinear);
          const auto at = [&](int64_t a, int64_t b) { return x[static_cast<size_t>(((r * h + a) * w + b) * c + k)]; };
          const double top = at(ty.lower, tx.lower) * (1 - tx.lerp) + at(ty.lower, tx.upper) * tx.lerp;
          const double bottom = at(ty.upper, tx.lower) * (1 - tx.lerp) + at(ty.upper, tx.upper) * tx.lerp;
          y[static_cast<size_t>(((r * oh + i) * ow + j) * c + k)] = top * (1 - ty.lerp) + bottom * ty.lerp;
        }
  return y;
}

TEST(UpSampling2dLayer, MatchesTheReferenceAndFiniteDifferences) {
  const int64_t rows = 2, h = 3, w = 4, c = 2;
  for (const bool bilinear : {false, true})
    for (const auto& [sh, sw] : {std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{3, 1},
                                 std::pair<int64_t, int64_t>{1, 4}}) {
      const std::string config = R"({"size": [)" + std::to_string(sh) + ", " + std::to_string(sw) +
                                 R"(], "interpolation": ")" + (bilinear ? "bilinear" : "nearest") + R"("})";
      SCOPED_TRACE(config);
      auto layer = up_sampling(config);
      EXPECT_EQ(layer->build({h, w, c}), (Shape{h * sh, w * sw, c}));
      const int64_t a = sh, b = sw;
      test::check_layer(*layer, {{h, w, c}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
        return reference(rows, h, w, c, a, b, bilinear, x[0]);
      });
    }
}

TEST(UpSampling2dLayer, ReadsAndWritesKerasConfig) {
  const std::string keras = R"({"class_name": "UpSampling2D", "config": {"name": "up_sampling2d", "trainable": true,
      "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}},
      "size": [2, 3], "data_format": "channels_last", "interpolation": "bilinear"}})";
  auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
  EXPECT_EQ(layer->build({4, 5, 3}), (Shape{8, 15, 3}));
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("config", "").at("interpolation", "").as_string(""), "bilinear");
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({4, 5, 3}), (Shape{8, 15, 3}));
  EXPECT_EQ(again->to_json().dump(), out.dump());
  EXPECT_EQ(up_sampling("{}")->build({4, 5, 3}), (Shape{8, 10, 3}));  // Keras's default size 2
}

TEST(UpSampling2dLayer, RefusesWhatKerasRefusesAndSaysWhatKxLacks) {
  const auto status = [](const std::string& config, const Shape& in = {4, 4, 2}) {
    return test::status_of([&] { up_sampling(config)->build(in); });
  };
  EXPECT_EQ(status(R"({"size": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"size": [2, 2, 2]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"interpolation": "cubic"})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"interpolation": "bicubic"})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"data_format": "channels_first"})"), Status::Unsupported);
  EXPECT_EQ(status(R"({})", {4, 4}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"size": 3037000500})", {3037000500, 1, 1}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"interpolation": "bilinear"})"), Status::Ok);
}

TEST(UpSampling2dLayer, TwoReplicasTrainAsOne) {
  const std::vector<std::string> layers{
      R"({"class_name": "Conv2D", "config": {"filters": 3, "kernel_size": 3, "strides": 2, "activation": "relu"}})",
      R"({"class_name": "UpSampling2D", "config": {"interpolation": "bilinear"}})",
      R"({"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 2}})",
      R"({"class_name": "UpSampling2D", "config": {"size": [1, 2]}})",
      R"({"class_name": "Flatten", "config": {}})",
      R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
  };
  const std::vector<float> one = test::weights_after_training({7, 7, 2}, layers, 1);
  const std::vector<float> two = test::weights_after_training({7, 7, 2}, layers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
