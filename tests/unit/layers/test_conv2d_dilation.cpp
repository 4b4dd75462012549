// Conv2D's dilation_rate (keras.layers.Conv2D): forward against a float64 dilated convolution and
// backward against finite differences ("same" and "valid", square and not, with an activation),
// Keras's config both ways, what Keras refuses (strides and dilation together), and two CPU replicas
// training as one.
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

std::unique_ptr<core::Layer> conv_from(const std::string& config) {
  return core::make_layer(
      core::layer_spec_from_json(json::parse(R"({"class_name": "Conv2D", "config": )" + config + "}")));
}

struct DilatedCase {
  const char* config;
  int64_t h, w, c, filters, kh, kw, dh, dw;
  bool same, bias, tanh;
};

// y[r, i, j, f] = act(sum over taps a, b and channels of x[i + a * dh - top, j + b * dw - left] *
// k[a, b, c, f] + bias), TensorFlow's "same" padding (the odd zero after) over the dilated span.
Vec reference(const DilatedCase& k, int64_t rows, const Vec& x, const Vec& w) {
  const int64_t span_h = (k.kh - 1) * k.dh + 1, span_w = (k.kw - 1) * k.dw + 1;
  const int64_t oh = k.same ? k.h : k.h - span_h + 1, ow = k.same ? k.w : k.w - span_w + 1;
  const int64_t top = k.same ? (span_h - 1) / 2 : 0, left = k.same ? (span_w - 1) / 2 : 0;
  const int64_t F = k.filters;
  Vec y(static_cast<size_t>(rows * oh * ow * F));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t f = 0; f < F; ++f) {
          double s = k.bias ? w[static_cast<size_t>(k.kh * k.kw * k.c * F + f)] : 0.0;
          for (int64_t a = 0; a < k.kh; ++a)
            for (int64_t b = 0; b < k.kw; ++b) {
              const int64_t yy = i + a * k.dh - top, xx = j + b * k.dw - left;
              if (yy < 0 || yy >= k.h || xx < 0 || xx >= k.w) continue;
              for (int64_t ch = 0; ch < k.c; ++ch)
                s += x[static_cast<size_t>(((r * k.h + yy) * k.w + xx) * k.c + ch)] *
                     w[static_cast<size_t>(((a * k.kw + b) * k.c + ch) * F + f)];
            }
          y[static_cast<size_t>(((r * oh + i) * ow + j) * F + f)] = k.tanh ? std::tanh(s) : s;
        }
  return y;
}

TEST(Conv2dDilation, MatchesTheReferenceAndFiniteDifferences) {
  const DilatedCase cases[] = {
      {R"({"filters": 3, "kernel_size": 3, "dilation_rate": 2, "padding": "same"})", 7, 6, 2, 3, 3, 3, 2, 2, true,
       true, false},
      {R"({"filters": 2, "kernel_size": [2, 3], "dilation_rate": [3, 2], "activation": "tanh"})", 8, 7, 3, 2, 2, 3, 3, 2,
       false, true, true},
      {R"({"filters": 4, "kernel_size": [3, 2], "dilation_rate": [1, 3], "padding": "same", "use_bias": false})", 5, 8,
       2, 4, 3, 2, 1, 3, true, false, false},
  };
  for (const DilatedCase& k : cases) {
    SCOPED_TRACE(k.config);
    auto layer = conv_from(k.config);
    const Shape out = layer->build({k.h, k.w, k.c});
    const int64_t span_h = (k.kh - 1) * k.dh + 1, span_w = (k.kw - 1) * k.dw + 1;
    EXPECT_EQ(out, (Shape{k.same ? k.h : k.h - span_h + 1, k.same ? k.w : k.w - span_w + 1, k.filters}));
    const size_t n = static_cast<size_t>(k.kh * k.kw * k.c * k.filters + (k.bias ? k.filters : 0));
    const std::vector<float> w = test::random_floats(n, 13);
    const int64_t rows = 2;
    test::check_layer(*layer, {{k.h, k.w, k.c}}, rows, w,
                      [&](const std::vector<Vec>& x, const Vec& wd) { return reference(k, rows, x[0], wd); });
  }
}

TEST(Conv2dDilation, ReadsAndWritesKerasConfig) {
  auto layer = conv_from(R"({"name": "c", "filters": 2, "kernel_size": 3, "dilation_rate": [2, 3]})");
  EXPECT_EQ(layer->build({9, 9, 1}), (Shape{5, 3, 2}));
  const json::Value out = layer->to_json();
  const json::Value::Array& rate = out.at("config", "").at("dilation_rate", "").as_array("");
  ASSERT_EQ(rate.size(), 2u);
  EXPECT_EQ(rate[0].as_int(""), 2);
  EXPECT_EQ(rate[1].as_int(""), 3);
  EXPECT_EQ(core::make_layer(core::layer_spec_from_json(out))->build({9, 9, 1}), (Shape{5, 3, 2}));
  // An undilated one writes Keras's [1, 1].
  auto plain = conv_from(R"({"name": "p", "filters": 2, "kernel_size": 3})");
  plain->build({5, 5, 1});
  EXPECT_EQ(plain->to_json().at("config", "").at("dilation_rate", "").as_array("")[0].as_int(""), 1);
}

TEST(Conv2dDilation, RefusesWhatKerasRefuses) {
  const auto status = [](const std::string& config) {
    return test::status_of([&] { conv_from(config)->build({5, 5, 2}); });
  };
  EXPECT_EQ(status(R"({"filters": 2, "kernel_size": 3, "dilation_rate": 2, "strides": 2})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"filters": 2, "kernel_size": 3, "dilation_rate": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"filters": 2, "kernel_size": 3, "dilation_rate": 3})"), Status::InvalidArgument);  // 7 > 5
  EXPECT_EQ(status(R"({"filters": 2, "kernel_size": 3, "dilation_rate": 3, "padding": "same"})"), Status::Ok);
}

TEST(Conv2dDilation, TwoReplicasTrainAsOne) {
  const std::vector<std::string> layers{
      R"({"class_name": "Conv2D", "config": {"filters": 3, "kernel_size": 3, "dilation_rate": 2, "padding": "same",
        "activation": "relu"}})",
      R"({"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 2, "dilation_rate": [2, 1]}})",
      R"({"class_name": "Flatten", "config": {}})",
      R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
  };
  const std::vector<float> one = test::weights_after_training({6, 6, 2}, layers, 1);
  const std::vector<float> two = test::weights_after_training({6, 6, 2}, layers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
