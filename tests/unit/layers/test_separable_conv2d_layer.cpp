// SeparableConv2D and Conv2DTranspose (keras.layers): forward against float64 references and backward
// against finite differences (strides, paddings, dilation, depth multipliers, output_padding), Keras's
// JSON config both ways, what they refuse, and two CPU replicas training as one.
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

std::unique_ptr<core::Layer> layer_from(const std::string& class_name, const std::string& config) {
  return core::make_layer(core::layer_spec_from_json(
      json::parse(R"({"class_name": ")" + class_name + R"(", "config": )" + config + "}")));
}

struct Axis {
  int64_t in, k, stride, dilation;
};
// The output length and the padding before the input of a convolution along one axis, TensorFlow's.
std::pair<int64_t, int64_t> conv_axis(const Axis& a, bool same) {
  const int64_t span = (a.k - 1) * a.dilation + 1;
  if (!same) return {(a.in - span) / a.stride + 1, 0};
  const int64_t out = (a.in + a.stride - 1) / a.stride;
  return {out, std::max<int64_t>((out - 1) * a.stride + span - a.in, 0) / 2};
}

struct SeparableCase {
  const char* config;
  int64_t h, w, c;
  Axis rows, cols;
  int64_t m, filters;
  bool same, bias;
};

// The depthwise convolution of every channel (w[a, b, c, k]), then the pointwise one (p[c * m + k, f])
// plus the bias.
Vec separable_reference(const SeparableCase& k, int64_t rows, const Vec& x, const Vec& w) {
  const auto [oh, top] = conv_axis(k.rows, k.same);
  const auto [ow, left] = conv_axis(k.cols, k.same);
  const int64_t M = k.c * k.m, F = k.filters, kh = k.rows.k, kw = k.cols.k;
  const double* p = w.data() + kh * kw * M;
  Vec y(static_cast<size_t>(rows * oh * ow * F));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        Vec mid(static_cast<size_t>(M), 0.0);
        for (int64_t o = 0; o < M; ++o)
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t b = 0; b < kw; ++b) {
              const int64_t yy = i * k.rows.stride + a * k.rows.dilation - top;
              const int64_t xx = j * k.cols.stride + b * k.cols.dilation - left;
              if (yy < 0 || yy >= k.h || xx < 0 || xx >= k.w) continue;
              mid[static_cast<size_t>(o)] += x[static_cast<size_t>(((r * k.h + yy) * k.w + xx) * k.c + o / k.m)] *
                                             w[static_cast<size_t>((a * kw + b) * M + o)];
            }
        for (int64_t f = 0; f < F; ++f) {
          double s = k.bias ? p[M * F + f] : 0.0;
          for (int64_t o = 0; o < M; ++o) s += mid[static_cast<size_t>(o)] * p[o * F + f];
          y[static_cast<size_t>(((r * oh + i) * ow + j) * F + f)] = s;
        }
      }
  return y;
}

TEST(SeparableConv2dLayer, MatchesTheReferenceAndFiniteDifferences) {
  const SeparableCase cases[] = {
      {R"({"filters": 4, "kernel_size": 3, "padding": "same"})", 5, 6, 3, {5, 3, 1, 1}, {6, 3, 1, 1}, 1, 4, true, true},
      {R"({"filters": 3, "kernel_size": [3, 2], "strides": 2, "depth_multiplier": 2, "use_bias": false})", 7, 6, 2,
       {7, 3, 2, 1}, {6, 2, 2, 1}, 2, 3, false, false},
      {R"({"filters": 2, "kernel_size": 3, "dilation_rate": [2, 1], "padding": "same"})", 7, 5, 2, {7, 3, 1, 2},
       {5, 3, 1, 1}, 1, 2, true, true},
  };
  for (const SeparableCase& k : cases) {
    SCOPED_TRACE(k.config);
    auto layer = layer_from("SeparableConv2D", k.config);
    layer->build({k.h, k.w, k.c});
    ASSERT_EQ(layer->params().size(), k.bias ? 3u : 2u);
    EXPECT_EQ(layer->params()[0].name, "depthwise_kernel");
    EXPECT_EQ(layer->params()[1].name, "pointwise_kernel");
    const size_t n = static_cast<size_t>(k.rows.k * k.cols.k * k.c * k.m + k.c * k.m * k.filters + (k.bias ? k.filters : 0));
    const std::vector<float> w = test::random_floats(n, 9);
    const int64_t rows = 2;
    test::check_layer(*layer, {{k.h, k.w, k.c}}, rows, w,
                      [&](const std::vector<Vec>& x, const Vec& wd) { return separable_reference(k, rows, x[0], wd); });
  }
}

struct TransposeCase {
  const char* config;
  int64_t h, w, c;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t out_h, out_w;  // Keras's output size (keras.layers.Conv2DTranspose.compute_output_shape)
  int64_t filters;
  bool same, bias;
};

// y[r, o, f] = sum over input positions i and taps a with o = i * stride + a * dilation - pad of
// x[r, i, c] w[a, f, c] (+ b[f]), pad TensorFlow's "same" padding of the convolution from y to x.
Vec transpose_reference(const TransposeCase& k, int64_t rows, const Vec& x, const Vec& w) {
  const auto pad = [&](int64_t in, int64_t out, int64_t kk, int64_t s, int64_t d) {
    return k.same ? std::max<int64_t>((in - 1) * s + (kk - 1) * d + 1 - out, 0) / 2 : 0;
  };
  const int64_t top = pad(k.h, k.out_h, k.kh, k.sh, k.dh), left = pad(k.w, k.out_w, k.kw, k.sw, k.dw);
  const int64_t F = k.filters, C = k.c;
  Vec y(static_cast<size_t>(rows * k.out_h * k.out_w * F), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t q = 0; q < k.out_h * k.out_w; ++q)
      for (int64_t f = 0; f < F && k.bias; ++f)
        y[static_cast<size_t>((r * k.out_h * k.out_w + q) * F + f)] = w[static_cast<size_t>(k.kh * k.kw * F * C + f)];
    for (int64_t i = 0; i < k.h; ++i)
      for (int64_t j = 0; j < k.w; ++j)
        for (int64_t a = 0; a < k.kh; ++a)
          for (int64_t b = 0; b < k.kw; ++b) {
            const int64_t oy = i * k.sh + a * k.dh - top, ox = j * k.sw + b * k.dw - left;
            if (oy < 0 || oy >= k.out_h || ox < 0 || ox >= k.out_w) continue;
            for (int64_t f = 0; f < F; ++f)
              for (int64_t c = 0; c < C; ++c)
                y[static_cast<size_t>(((r * k.out_h + oy) * k.out_w + ox) * F + f)] +=
                    x[static_cast<size_t>(((r * k.h + i) * k.w + j) * C + c)] *
                    w[static_cast<size_t>(((a * k.kw + b) * F + f) * C + c)];
          }
  }
  return y;
}

TEST(Conv2dTransposeLayer, MatchesTheReferenceAndFiniteDifferences) {
  // Output sizes as keras.layers.Conv2DTranspose(...).compute_output_shape gives them.
  const TransposeCase cases[] = {
      {R"({"filters": 3, "kernel_size": 3, "strides": 2, "padding": "same"})", 3, 4, 2, 3, 3, 2, 2, 1, 1, 6, 8, 3,
       true, true},
      {R"({"filters": 2, "kernel_size": [2, 3], "strides": [2, 1], "use_bias": false})", 3, 3, 3, 2, 3, 2, 1, 1, 1, 6,
       5, 2, false, false},
      {R"({"filters": 2, "kernel_size": 1, "strides": 3})", 2, 3, 2, 1, 1, 3, 3, 1, 1, 6, 9, 2, false, true},
      {R"({"filters": 2, "kernel_size": 3, "strides": 2, "padding": "same", "output_padding": [0, 1]})", 3, 3, 2, 3,
       3, 2, 2, 1, 1, 5, 6, 2, true, true},
      {R"({"filters": 2, "kernel_size": 3, "strides": 3, "output_padding": 2})", 2, 2, 2, 3, 3, 3, 3, 1, 1, 8, 8, 2,
       false, true},
      {R"({"filters": 2, "kernel_size": 2, "dilation_rate": 2, "padding": "same"})", 4, 3, 2, 2, 2, 1, 1, 2, 2, 4, 3,
       2, true, true},
  };
  for (const TransposeCase& k : cases) {
    SCOPED_TRACE(k.config);
    auto layer = layer_from("Conv2DTranspose", k.config);
    EXPECT_EQ(layer->build({k.h, k.w, k.c}), (Shape{k.out_h, k.out_w, k.filters}));
    EXPECT_EQ(layer->params()[0].shape, (Shape{k.kh, k.kw, k.filters, k.c}));
    const size_t n = static_cast<size_t>(k.kh * k.kw * k.filters * k.c + (k.bias ? k.filters : 0));
    const std::vector<float> w = test::random_floats(n, 13);
    const int64_t rows = 2;
    test::check_layer(*layer, {{k.h, k.w, k.c}}, rows, w,
                      [&](const std::vector<Vec>& x, const Vec& wd) { return transpose_reference(k, rows, x[0], wd); });
  }
}

TEST(SeparableConv2dLayer, ReadsAndWritesKerasConfig) {
  const std::string separable = R"({"class_name": "SeparableConv2D", "config": {"name": "sep", "trainable": true,
      "filters": 8, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format": "channels_last",
      "dilation_rate": [2, 2], "depth_multiplier": 2, "activation": "relu", "use_bias": true,
      "depthwise_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform"}}})";
  const std::string transpose = R"({"class_name": "Conv2DTranspose", "config": {"name": "up", "trainable": true,
      "filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same", "output_padding": [1, 1],
      "data_format": "channels_last", "dilation_rate": [1, 1], "activation": "linear", "use_bias": false}})";
  for (const auto& [keras, out] : {std::pair{separable, Shape{6, 5, 8}}, std::pair{transpose, Shape{12, 10, 4}}}) {
    auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
    EXPECT_EQ(layer->build({6, 5, 3}), out);
    const json::Value written = layer->to_json();
    auto again = core::make_layer(core::layer_spec_from_json(written));
    EXPECT_EQ(again->build({6, 5, 3}), out);
    EXPECT_EQ(again->params().size(), layer->params().size());
    EXPECT_EQ(again->to_json().dump(), written.dump());
  }
}

TEST(SeparableConv2dLayer, RefusesWhatKerasRefusesAndSaysWhatKxLacks) {
  const auto status = [](const std::string& class_name, const std::string& config, const Shape& in = {5, 5, 2}) {
    return test::status_of([&] { layer_from(class_name, config)->build(in); });
  };
  for (const char* name : {"SeparableConv2D", "Conv2DTranspose"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(status(name, R"({"kernel_size": 3})"), Status::InvalidArgument);  // no filters
    EXPECT_EQ(status(name, R"({"filters": 2, "kernel_size": 0})"), Status::InvalidArgument);
    EXPECT_EQ(status(name, R"({"filters": 2, "kernel_size": 3, "strides": 2, "dilation_rate": 2})"),
              Status::InvalidArgument);
    EXPECT_EQ(status(name, R"({"filters": 2, "kernel_size": 3, "padding": "causal"})"), Status::InvalidArgument);
    EXPECT_EQ(status(name, R"({"filters": 2, "kernel_size": 3, "data_format": "channels_first"})"), Status::Unsupported);
    EXPECT_EQ(status(name, R"({"filters": 2, "kernel_size": 3})", {5, 5}), Status::InvalidArgument);
    EXPECT_EQ(status(name, R"({"filters": 2, "kernel_size": 3, "padding": "same"})"), Status::Ok);
  }
  EXPECT_EQ(status("SeparableConv2D", R"({"filters": 2, "kernel_size": 7})"), Status::InvalidArgument);
  EXPECT_EQ(status("SeparableConv2D", R"({"filters": 2, "kernel_size": 3, "depth_multiplier": 0})"),
            Status::InvalidArgument);
  EXPECT_EQ(status("Conv2DTranspose", R"({"filters": 2, "kernel_size": 3, "strides": 2, "output_padding": 2})"),
            Status::InvalidArgument);  // not below the stride
}

TEST(SeparableConv2dLayer, TwoReplicasTrainAsOne) {
  const std::vector<std::string> layers{
      R"({"class_name": "SeparableConv2D", "config": {"filters": 4, "kernel_size": 3, "padding": "same",
        "depth_multiplier": 2, "activation": "relu"}})",
      R"({"class_name": "Conv2DTranspose", "config": {"filters": 3, "kernel_size": 3, "strides": 2, "padding": "same",
        "activation": "relu"}})",
      R"({"class_name": "SeparableConv2D", "config": {"filters": 2, "kernel_size": 3, "strides": 2}})",
      R"({"class_name": "Flatten", "config": {}})",
      R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
  };
  const std::vector<float> one = test::weights_after_training({6, 6, 3}, layers, 1);
  const std::vector<float> two = test::weights_after_training({6, 6, 3}, layers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
