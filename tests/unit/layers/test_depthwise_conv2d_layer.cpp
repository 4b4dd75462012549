// DepthwiseConv2D (keras.layers.DepthwiseConv2D): forward against a float64 direct convolution and
// backward against finite differences for strides, dilations, paddings and multipliers, Keras's JSON config both
// ways, what it refuses, and two CPU replicas training as one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

struct Geometry {
  const char* config;
  int64_t h, w, c;        // input
  int64_t kh, kw, sh, sw, m;
  bool same, bias;
  bool tanh = false;
  int64_t dh = 1, dw = 1;  // dilation_rate
};

// y[r, i, j, c * m + k] = sum over the window of x * w[a, b, c, k] (+ bias), "same" padding placing
// the odd pixel at the bottom and right as TensorFlow does.
Vec reference(const Geometry& g, int64_t rows, const Vec& x, const Vec& w) {
  const int64_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;
  const int64_t oh = g.same ? (g.h + g.sh - 1) / g.sh : (g.h - span_h) / g.sh + 1;
  const int64_t ow = g.same ? (g.w + g.sw - 1) / g.sw : (g.w - span_w) / g.sw + 1;
  const int64_t top = g.same ? std::max<int64_t>((oh - 1) * g.sh + span_h - g.h, 0) / 2 : 0;
  const int64_t left = g.same ? std::max<int64_t>((ow - 1) * g.sw + span_w - g.w, 0) / 2 : 0;
  const int64_t O = g.c * g.m;
  Vec y(static_cast<size_t>(rows * oh * ow * O), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < O; ++o) {
          double s = g.bias ? w[static_cast<size_t>(g.kh * g.kw * O + o)] : 0.0;
          for (int64_t a = 0; a < g.kh; ++a)
            for (int64_t b = 0; b < g.kw; ++b) {
              const int64_t yy = i * g.sh + a * g.dh - top, xx = j * g.sw + b * g.dw - left;
              if (yy < 0 || yy >= g.h || xx < 0 || xx >= g.w) continue;
              s += x[static_cast<size_t>(((r * g.h + yy) * g.w + xx) * g.c + o / g.m)] *
                   w[static_cast<size_t>((a * g.kw + b) * O + o)];
            }
          y[static_cast<size_t>(((r * oh + i) * ow + j) * O + o)] = g.tanh ? std::tanh(s) : s;
        }
  return y;
}

TEST(DepthwiseConv2dLayer, MatchesTheReferenceAndFiniteDifferences) {
  const Geometry cases[] = {
      {R"({"kernel_size": 3, "padding": "same"})", 5, 6, 3, 3, 3, 1, 1, 1, true, true},
      {R"({"kernel_size": 3, "strides": 2, "depth_multiplier": 2, "use_bias": false})", 7, 6, 2, 3, 3, 2, 2, 2, false,
       false},
      {R"({"kernel_size": [2, 3], "strides": [2, 1], "padding": "same", "activation": "tanh"})", 5, 4, 4, 2, 3, 2, 1,
       1, true, true, true},
      {R"({"kernel_size": 3, "strides": 2, "padding": "same", "depth_multiplier": 3})", 6, 6, 2, 3, 3, 2, 2, 3, true,
       true},
      // One filter per channel over more channels than the kernels' blocks of 64 (and a rest), strided
      // along the row as MobileNet's downsampling depthwise convolutions are.
      {R"({"kernel_size": 3, "strides": 2, "padding": "same"})", 5, 7, 70, 3, 3, 2, 2, 1, true, true},
      {R"({"kernel_size": [3, 2], "strides": [1, 2], "use_bias": false})", 4, 9, 67, 3, 2, 1, 2, 1, false, false},
      // EfficientNet's 5x5 window and a dilated one over a block of sixteen channels and a rest.
      {R"({"kernel_size": 5, "strides": 2, "padding": "same"})", 7, 6, 18, 5, 5, 2, 2, 1, true, true},
      {R"({"kernel_size": 3, "dilation_rate": 2, "padding": "same", "use_bias": false})", 6, 5, 19, 3, 3, 1, 1, 1,
       true, false, false, 2, 2},
      // Dilated (strides 1, as Keras requires): "same" pads by the dilated span, "valid" shrinks by it.
      {R"({"kernel_size": 3, "dilation_rate": 2, "padding": "same"})", 7, 6, 3, 3, 3, 1, 1, 1, true, true, false, 2, 2},
      {R"({"kernel_size": [2, 3], "dilation_rate": [3, 2], "depth_multiplier": 2, "activation": "tanh"})", 8, 7, 2, 2,
       3, 1, 1, 2, false, true, true, 3, 2},
      {R"({"kernel_size": [3, 2], "dilation_rate": [1, 3], "padding": "same", "use_bias": false})", 5, 8, 2, 3, 2, 1, 1,
       1, true, false, false, 1, 3},
  };
  for (const Geometry& g : cases) {
    SCOPED_TRACE(g.config);
    LayerSpec spec = test::spec_of(LayerKind::DepthwiseConv2D, "dw");
    spec.config = g.config;
    auto layer = core::make_layer(spec);
    const Shape out = layer->build({g.h, g.w, g.c});
    EXPECT_EQ(out[2], g.c * g.m);
    const size_t n = static_cast<size_t>(g.kh * g.kw * g.c * g.m + (g.bias ? g.c * g.m : 0));
    ASSERT_EQ(layer->params().size(), g.bias ? 2u : 1u);
    const std::vector<float> w = test::random_floats(n, 11);
    const int64_t rows = 3;
    test::check_layer(*layer, {{g.h, g.w, g.c}}, rows, w,
                      [&](const std::vector<Vec>& x, const Vec& wd) { return reference(g, rows, x[0], wd); });
  }
}

TEST(DepthwiseConv2dLayer, ReadsAndWritesKerasConfig) {
  // As Keras 3.15 writes keras.layers.DepthwiseConv2D(3, strides=2, use_bias=False) (initializers and
  // dtype policy left out: kx ignores keys it does not use).
  const std::string keras = R"({"class_name": "DepthwiseConv2D", "config": {"name": "block_1_depthwise",
      "trainable": true, "kernel_size": [3, 3], "strides": [2, 2], "padding": "valid", "data_format": "channels_last",
      "dilation_rate": [1, 1], "depth_multiplier": 1, "activation": "linear", "use_bias": false,
      "depthwise_regularizer": null, "bias_regularizer": null}})";
  const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
  EXPECT_EQ(spec.kind, LayerKind::DepthwiseConv2D);
  auto layer = core::make_layer(spec);
  EXPECT_EQ(layer->build({9, 9, 8}), (Shape{4, 4, 8}));
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("class_name", "").as_string(""), "DepthwiseConv2D");
  const json::Value& config = out.at("config", "");
  EXPECT_EQ(config.at("padding", "").as_string(""), "valid");
  EXPECT_FALSE(config.at("use_bias", "").as_bool(""));
  EXPECT_EQ(config.at("depth_multiplier", "").as_int(""), 1);
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({9, 9, 8}), (Shape{4, 4, 8}));
  EXPECT_EQ(again->params().size(), 1u);
  // A dilated one writes its dilation_rate back, and reads it again.
  auto dilated = core::make_layer(core::layer_spec_from_json(json::parse(
      R"({"class_name": "DepthwiseConv2D", "config": {"name": "d", "kernel_size": 3, "dilation_rate": [2, 3]}})")));
  EXPECT_EQ(dilated->build({9, 9, 2}), (Shape{5, 3, 2}));
  const json::Value written = dilated->to_json();
  const json::Value::Array& rate = written.at("config", "").at("dilation_rate", "").as_array("");
  ASSERT_EQ(rate.size(), 2u);
  EXPECT_EQ(rate[0].as_int(""), 2);
  EXPECT_EQ(rate[1].as_int(""), 3);
  EXPECT_EQ(core::make_layer(core::layer_spec_from_json(written))->build({9, 9, 2}), (Shape{5, 3, 2}));
}

TEST(DepthwiseConv2dLayer, RefusesWhatKerasRefusesAndSaysWhatKxLacks) {
  const auto status = [](const std::string& config, const Shape& in = {5, 5, 2}) {
    return test::status_of([&] {
      auto l = core::make_layer(
          core::layer_spec_from_json(json::parse(R"({"class_name": "DepthwiseConv2D", "config": )" + config + "}")));
      l->build(in);
    });
  };
  EXPECT_EQ(status(R"({})"), Status::InvalidArgument);  // no kernel_size
  EXPECT_EQ(status(R"({"kernel_size": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"kernel_size": 3, "strides": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"kernel_size": 3, "depth_multiplier": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"kernel_size": 3, "padding": "causal"})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"kernel_size": 7})"), Status::InvalidArgument);  // larger than a "valid" input
  EXPECT_EQ(status(R"({"kernel_size": 3, "depth_multiplier": 3037000500})", {4, 4, 3037000500}),
            Status::InvalidArgument);  // the kernel's size overflows
  EXPECT_EQ(status(R"({"kernel_size": 2, "dilation_rate": 2})"), Status::Ok);  // spans 3 of the 5
  EXPECT_EQ(status(R"({"kernel_size": 3, "dilation_rate": 3})"), Status::InvalidArgument);  // spans 7 > 5, "valid"
  EXPECT_EQ(status(R"({"kernel_size": 3, "dilation_rate": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"kernel_size": 3, "strides": 2, "dilation_rate": 2, "padding": "same"})"),
            Status::InvalidArgument);  // Keras: strides > 1 with dilation_rate > 1
  EXPECT_EQ(status(R"({"kernel_size": 3, "data_format": "channels_first"})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"kernel_size": 3})", {5, 5}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"kernel_size": 3, "padding": "same"})"), Status::Ok);
}

const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "DepthwiseConv2D", "config": {"kernel_size": 3, "padding": "same",
      "depth_multiplier": 2, "activation": "relu"}})",
    R"({"class_name": "DepthwiseConv2D", "config": {"kernel_size": 3, "dilation_rate": 2, "padding": "same"}})",
    R"({"class_name": "DepthwiseConv2D", "config": {"kernel_size": 3, "strides": 2}})",
    R"({"class_name": "Flatten", "config": {}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

std::vector<float> trained_weights(int replicas) {
  return test::weights_after_training({6, 6, 3}, kTrainedLayers, replicas);
}

TEST(DepthwiseConv2dLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = trained_weights(1), two = trained_weights(2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
