// Conv1D, MaxPooling1D, AveragePooling1D and GlobalAveragePooling1D (keras.layers): forward against a
// float64 reference and backward against finite differences (paddings valid, same and causal, strides,
// dilation), Keras's JSON config both ways, what they refuse, and two CPU replicas training as one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
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

struct Conv1dCase {
  const char* config;
  int64_t steps, channels, filters, kernel, stride, dilation;
  const char* padding;
  bool bias;
};

// y[r, t, f] = sum over taps a and channels c of x[r, t * stride + a * dilation - left, c] w[a, c, f]
// (+ b[f]), zero outside the input; "same" puts the odd padding on the right, "causal" all on the left.
Vec conv1d_reference(const Conv1dCase& k, int64_t rows, const Vec& x, const Vec& w) {
  const int64_t span = (k.kernel - 1) * k.dilation + 1;
  const std::string padding = k.padding;
  int64_t out = 0, left = 0;
  if (padding == "valid") {
    out = (k.steps - span) / k.stride + 1;
  } else if (padding == "same") {
    out = (k.steps + k.stride - 1) / k.stride;
    left = std::max<int64_t>((out - 1) * k.stride + span - k.steps, 0) / 2;
  } else {
    out = (k.steps - 1) / k.stride + 1;
    left = span - 1;
  }
  const int64_t C = k.channels, F = k.filters;
  Vec y(static_cast<size_t>(rows * out * F));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < out; ++t)
      for (int64_t f = 0; f < F; ++f) {
        double s = k.bias ? w[static_cast<size_t>(k.kernel * C * F + f)] : 0.0;
        for (int64_t a = 0; a < k.kernel; ++a) {
          const int64_t at = t * k.stride + a * k.dilation - left;
          if (at < 0 || at >= k.steps) continue;
          for (int64_t c = 0; c < C; ++c)
            s += x[static_cast<size_t>((r * k.steps + at) * C + c)] * w[static_cast<size_t>((a * C + c) * F + f)];
        }
        y[static_cast<size_t>((r * out + t) * F + f)] = s;
      }
  return y;
}

TEST(Conv1dLayer, MatchesTheReferenceAndFiniteDifferences) {
  const Conv1dCase cases[] = {
      {R"({"filters": 4, "kernel_size": 3})", 9, 3, 4, 3, 1, 1, "valid", true},
      {R"({"filters": 3, "kernel_size": [3], "strides": 2, "padding": "same"})", 8, 2, 3, 3, 2, 1, "same", true},
      {R"({"filters": 2, "kernel_size": 2, "padding": "causal", "dilation_rate": 2, "use_bias": false})", 7, 3, 2, 2,
       1, 2, "causal", false},
      {R"({"filters": 3, "kernel_size": 3, "padding": "same", "dilation_rate": [3]})", 10, 2, 3, 3, 1, 3, "same", true},
      {R"({"filters": 2, "kernel_size": 1})", 5, 4, 2, 1, 1, 1, "valid", true},  // the pointwise path
  };
  for (const Conv1dCase& k : cases) {
    SCOPED_TRACE(k.config);
    auto layer = layer_from("Conv1D", k.config);
    const Shape out = layer->build({k.steps, k.channels});
    EXPECT_EQ(out[1], k.filters);
    const size_t n = static_cast<size_t>(k.kernel * k.channels * k.filters + (k.bias ? k.filters : 0));
    const std::vector<float> w = test::random_floats(n, 5);
    const int64_t rows = 3;
    test::check_layer(*layer, {{k.steps, k.channels}}, rows, w,
                      [&](const std::vector<Vec>& x, const Vec& wd) { return conv1d_reference(k, rows, x[0], wd); });
  }
}

// Windows of `pool` steps every `stride` steps, the maximum or the mean of each channel.
Vec pool1d_reference(bool max, int64_t steps, int64_t C, int64_t pool, int64_t stride, int64_t rows, const Vec& x) {
  const int64_t out = (steps - pool) / stride + 1;
  Vec y(static_cast<size_t>(rows * out * C));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < out; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double s = max ? -1e300 : 0.0;
        for (int64_t a = 0; a < pool; ++a) {
          const double v = x[static_cast<size_t>((r * steps + t * stride + a) * C + c)];
          s = max ? std::max(s, v) : s + v / static_cast<double>(pool);
        }
        y[static_cast<size_t>((r * out + t) * C + c)] = s;
      }
  return y;
}

TEST(Pooling1dLayers, MatchTheReferenceAndFiniteDifferences) {
  const int64_t rows = 2, C = 3;
  for (const bool max : {true, false}) {
    for (const auto& [config, steps, pool, stride] :
         std::vector<std::tuple<std::string, int64_t, int64_t, int64_t>>{
             {R"({})", 7, 2, 2}, {R"({"pool_size": 3, "strides": 1})", 6, 3, 1}, {R"({"pool_size": [3], "strides": [2]})", 8, 3, 2}}) {
      SCOPED_TRACE(config + (max ? " max" : " average"));
      auto layer = layer_from(max ? "MaxPooling1D" : "AveragePooling1D", config);
      EXPECT_EQ(layer->build({steps, C}), (Shape{(steps - pool) / stride + 1, C}));
      const int64_t s = steps, p = pool, st = stride;
      test::check_layer(*layer, {{steps, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
        return pool1d_reference(max, s, C, p, st, rows, x[0]);
      });
    }
  }
  for (const bool keepdims : {false, true}) {
    auto layer = layer_from("GlobalAveragePooling1D", keepdims ? R"({"keepdims": true})" : "{}");
    EXPECT_EQ(layer->build({5, C}), keepdims ? (Shape{1, C}) : (Shape{C}));
    test::check_layer(*layer, {{5, C}}, rows, {},
                      [&](const std::vector<Vec>& x, const Vec&) { return pool1d_reference(false, 5, C, 5, 5, rows, x[0]); });
  }
}

TEST(Conv1dLayer, ReadsAndWritesKerasConfig) {
  // As Keras 3.15 writes keras.layers.Conv1D(8, 3, padding="causal", dilation_rate=2) (initializers
  // left out: kx ignores keys it does not use).
  const std::string keras = R"({"class_name": "Conv1D", "config": {"name": "conv1d", "trainable": true,
      "filters": 8, "kernel_size": [3], "strides": [1], "padding": "causal", "data_format": "channels_last",
      "dilation_rate": [2], "groups": 1, "activation": "relu", "use_bias": true, "kernel_regularizer": null}})";
  auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
  EXPECT_EQ(layer->build({10, 4}), (Shape{10, 8}));
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("class_name", "").as_string(""), "Conv1D");
  const json::Value& config = out.at("config", "");
  EXPECT_EQ(config.at("padding", "").as_string(""), "causal");
  EXPECT_EQ(config.at("dilation_rate", "").as_array("")[0].as_int(""), 2);
  EXPECT_EQ(config.at("activation", "").as_string(""), "relu");
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({10, 4}), (Shape{10, 8}));
  EXPECT_EQ(again->params().size(), 2u);
  for (const char* name : {"MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D"}) {
    SCOPED_TRACE(name);
    auto pool = layer_from(name, R"({"pool_size": [3], "strides": [1], "keepdims": true})");
    const Shape shape = pool->build({6, 2});
    auto copy = core::make_layer(core::layer_spec_from_json(pool->to_json()));
    EXPECT_EQ(copy->build({6, 2}), shape);
  }
}

TEST(Conv1dLayer, RefusesWhatKerasRefusesAndSaysWhatKxLacks) {
  const auto status = [](const std::string& class_name, const std::string& config, const Shape& in = {6, 2}) {
    return test::status_of([&] { layer_from(class_name, config)->build(in); });
  };
  EXPECT_EQ(status("Conv1D", R"({"kernel_size": 3})"), Status::InvalidArgument);  // no filters
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": [3, 3]})"), Status::InvalidArgument);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 3, "padding": "full"})"), Status::InvalidArgument);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 3, "strides": 2, "dilation_rate": 2})"),
            Status::InvalidArgument);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 4, "dilation_rate": 2})"), Status::InvalidArgument);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 3, "groups": 2})"), Status::Unsupported);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 3, "data_format": "channels_first"})"),
            Status::Unsupported);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 3})", {6, 6, 2}), Status::InvalidArgument);
  EXPECT_EQ(status("MaxPooling1D", R"({"pool_size": 7})"), Status::InvalidArgument);
  EXPECT_EQ(status("MaxPooling1D", R"({"padding": "same"})"), Status::Unsupported);
  EXPECT_EQ(status("AveragePooling1D", R"({"strides": 0})"), Status::InvalidArgument);
  EXPECT_EQ(status("GlobalAveragePooling1D", R"({})", {4, 4, 2}), Status::InvalidArgument);
  EXPECT_EQ(status("Conv1D", R"({"filters": 2, "kernel_size": 3, "padding": "causal"})"), Status::Ok);
}

TEST(Conv1dLayer, TwoReplicasTrainAsOne) {
  const std::vector<std::string> layers{
      R"({"class_name": "Conv1D", "config": {"filters": 4, "kernel_size": 3, "padding": "causal", "activation": "relu"}})",
      R"({"class_name": "MaxPooling1D", "config": {}})",
      R"({"class_name": "Conv1D", "config": {"filters": 3, "kernel_size": 2, "dilation_rate": 2, "padding": "same"}})",
      R"({"class_name": "AveragePooling1D", "config": {"pool_size": 2, "strides": 1}})",
      R"({"class_name": "GlobalAveragePooling1D", "config": {}})",
      R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
  };
  const std::vector<float> one = test::weights_after_training({12, 2}, layers, 1);
  const std::vector<float> two = test::weights_after_training({12, 2}, layers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
