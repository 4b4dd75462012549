// Keras's initializers in layer configs (kernel_initializer, depthwise_initializer, bias_initializer):
// the weights a compiled model draws follow Keras's formulas (mean, deviation, bounds of the
// distribution with Keras's fans; Orthogonal's orthogonality), the configs round trip in Keras's form,
// and what kx cannot draw is refused by name. EfficientNetB0's builder initialises as Keras's does.
// Each other layer's initializers: test_layer_initializers.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "io/json.hpp"
#include "kx/applications.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"

namespace kx {
namespace {

struct Moments {
  double mean = 0, stddev = 0, max_abs = 0;
};

Moments moments_of(const std::vector<float>& v) {
  Moments m;
  for (float x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (float x : v) {
    m.stddev += (x - m.mean) * (x - m.mean);
    m.max_abs = std::max(m.max_abs, std::fabs(static_cast<double>(x)));
  }
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size()));
  return m;
}

// Keras's VarianceScaling deviation for n units: sqrt(scale / n), divided by 0.87962566103423978 when
// the normal is cut at two deviations (the cut one then has sqrt(scale / n)).
TEST(KerasInitializers, VarianceScalingFollowsKerasFormulas) {
  struct Case {
    const char* layer;
    Shape input;
    double fan;  // the mode's fan with Keras's compute_fans
    double scale;
    const char* distribution;
  };
  const Case cases[] = {
      // EfficientNet's CONV_KERNEL_INITIALIZER on a 3x3 convolution of 64 to 128: fan_out 9 * 128.
      {R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 128, "kernel_size": 3, "kernel_initializer":
          {"class_name": "VarianceScaling", "config": {"scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal"}}}})",
       {5, 5, 64}, 9 * 128, 2.0, "truncated_normal"},
      // Its DENSE_KERNEL_INITIALIZER on 1280 to 1000: fan_out 1000, uniform.
      {R"({"class_name": "Dense", "config": {"name": "d", "units": 1000, "kernel_initializer":
          {"class_name": "VarianceScaling", "config": {"scale": 0.3333333333333333, "mode": "fan_out", "distribution": "uniform"}}}})",
       {1280}, 1000, 1.0 / 3.0, "uniform"},
      // The depthwise kernel's: fan_out 5 * 5 * 1 (depth multiplier 1); fan_in 5 * 5 * 96.
      {R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 5, "depthwise_initializer":
          {"class_name": "VarianceScaling", "config": {"scale": 2.0, "mode": "fan_in", "distribution": "untruncated_normal"}}}})",
       {7, 7, 96}, 5 * 5 * 96, 2.0, "untruncated_normal"},
      {R"({"class_name": "Conv1D", "config": {"name": "c1", "filters": 64, "kernel_size": 3, "kernel_initializer": "he_normal"}})",
       {9, 256}, 3 * 256, 2.0, "truncated_normal"},
      {R"({"class_name": "Dense", "config": {"name": "d", "units": 300, "kernel_initializer": "glorot_normal"}})",
       {500}, 400, 1.0, "truncated_normal"},
      {R"({"class_name": "Dense", "config": {"name": "d", "units": 300, "kernel_initializer": {"class_name": "LecunUniform"}}})",
       {500}, 500, 1.0, "uniform"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layer);
    const Model m = test::one_layer_model(c.input, c.layer);
    const std::string kernel = m.weights().front().name;
    const Moments got = moments_of(m.get_weight(kernel));
    const double deviation = std::sqrt(c.scale / c.fan);  // of the values drawn, in all three
    EXPECT_NEAR(got.mean, 0.0, 0.02 * deviation);
    EXPECT_NEAR(got.stddev, deviation, 0.02 * deviation);
    const std::string d = c.distribution;
    if (d == "uniform") {
      EXPECT_LE(got.max_abs, std::sqrt(3.0) * deviation);
    }
    if (d == "truncated_normal") {
      EXPECT_LE(got.max_abs, 2.0 * deviation / 0.87962566103423978);
      EXPECT_GT(got.max_abs, 1.9 * deviation / 0.87962566103423978);
    }
    if (d == "untruncated_normal") {
      EXPECT_GT(got.max_abs, 3.0 * deviation);  // tails past the cut
    }
  }
}

TEST(KerasInitializers, OtherClassesAndBiasesDrawWhatTheySay) {
  const Model m = test::one_layer_model({400}, R"({"class_name": "Dense", "config": {"name": "d", "units": 300,
      "kernel_initializer": {"class_name": "RandomNormal", "config": {"mean": 1.0, "stddev": 0.5}},
      "bias_initializer": {"class_name": "Constant", "config": {"value": 0.25}}}})");
  const Moments k = moments_of(m.get_weight("d/kernel"));
  EXPECT_NEAR(k.mean, 1.0, 0.01);
  EXPECT_NEAR(k.stddev, 0.5, 0.01);
  for (float b : m.get_weight("d/bias")) EXPECT_EQ(b, 0.25f);
  const Model t = test::one_layer_model({400}, R"({"class_name": "Dense", "config": {"name": "d", "units": 300,
      "kernel_initializer": {"class_name": "TruncatedNormal", "config": {"stddev": 0.1}}, "bias_initializer": "ones"}})");
  const Moments tk = moments_of(t.get_weight("d/kernel"));
  EXPECT_LE(tk.max_abs, 0.2);
  EXPECT_NEAR(tk.stddev, 0.1 * 0.87962566103423978, 0.002);  // TruncatedNormal's own stddev is before the cut
  for (float b : t.get_weight("d/bias")) EXPECT_EQ(b, 1.0f);
  const Model u = test::one_layer_model({400}, R"({"class_name": "Dense", "config": {"name": "d", "units": 300,
      "kernel_initializer": {"class_name": "RandomUniform", "config": {"minval": 2.0, "maxval": 3.0}}}})");
  const std::vector<float> uk = u.get_weight("d/kernel");
  EXPECT_GE(*std::min_element(uk.begin(), uk.end()), 2.0f);
  EXPECT_LT(*std::max_element(uk.begin(), uk.end()), 3.0f);
  // The same seed draws the same weights; another seed others.
  const std::string he = R"({"class_name": "Dense", "config": {"name": "d", "units": 8, "kernel_initializer": "he_uniform"}})";
  EXPECT_EQ(test::one_layer_model({6}, he, 4).get_weights(), test::one_layer_model({6}, he, 4).get_weights());
  EXPECT_NE(test::one_layer_model({6}, he, 4).get_weights(), test::one_layer_model({6}, he, 5).get_weights());
}

TEST(KerasInitializers, ConfigsRoundTripInKerasForm) {
  const Model m = test::one_layer_model({6, 6, 3}, R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 4, "kernel_size": 3,
      "kernel_initializer": {"module": "keras.initializers", "class_name": "VarianceScaling", "config": {"seed": null,
      "scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal", "input_axes": null, "output_axes": null},
      "registered_name": null}, "bias_initializer": "zeros"}})");
  const json::Value config = json::parse(m.to_json());
  const std::string text = config.dump();
  EXPECT_NE(text.find(R"("kernel_initializer": {"module": "keras.initializers", "class_name": "VarianceScaling", "config": {"seed": null, "scale": 2, "mode": "fan_out")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {})"),
            std::string::npos)
      << text;
  const Model back = Model::from_json(Strategy::mirrored({"cpu"}), m.to_json());
  EXPECT_EQ(back.to_json(), m.to_json());
  // A layer without one writes none (Keras's defaults).
  EXPECT_EQ(test::one_layer_model({3}, R"({"class_name": "Dense", "config": {"units": 2}})").to_json().find("initializer"),
            std::string::npos);
}

TEST(KerasInitializers, RefusesWhatKxCannotDrawByName) {
  const auto status = [](const std::string& init) {
    return test::status_of([&] {
      test::one_layer_model({4}, R"({"class_name": "Dense", "config": {"name": "d", "units": 3, "kernel_initializer": )" + init + "}}");
    });
  };
  EXPECT_EQ(status(R"("identity")"), Status::Unsupported);
  EXPECT_EQ(status(R"({"class_name": "Identity", "config": {"gain": 1.0}})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"class_name": "MyInitializer", "config": {}})"), Status::Unsupported);
  EXPECT_EQ(status(R"(7)"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"class_name": "Orthogonal", "config": {"gain": "big"}})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"class_name": "Constant", "config": {"value": [1, 2]}})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"("orthogonal")"), Status::Ok);
  EXPECT_EQ(status(R"({"class_name": "VarianceScaling", "config": {"mode": "fan_sideways"}})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"class_name": "VarianceScaling", "config": {"distribution": "cauchy"}})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"class_name": "VarianceScaling", "config": {"scale": -1}})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"class_name": "RandomNormal", "config": {"stddev": -0.1}})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"(null)"), Status::Ok);
  EXPECT_EQ(status(R"({"class_name": "VarianceScaling", "config": {"distribution": "normal"}})"), Status::Ok);
}

// max |G - gain^2 I| over G = W^T W (rows >= cols) or W W^T, W the weight as [rows, cols], cols its last axis.
double orthogonality_error(const std::vector<float>& w, int64_t cols, double gain) {
  const auto rows = static_cast<int64_t>(w.size()) / cols;
  const bool by_columns = rows >= cols;
  const int64_t n = by_columns ? cols : rows, length = by_columns ? rows : cols;
  const auto at = [&](int64_t vector, int64_t i) {
    return static_cast<double>(w[static_cast<size_t>(by_columns ? i * cols + vector : vector * cols + i)]);
  };
  double worst = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < length; ++i) dot += at(a, i) * at(b, i);
      worst = std::max(worst, std::fabs(dot - (a == b ? gain * gain : 0.0)));
    }
  return worst;
}

// Keras's Orthogonal: the weight flattened to [product of the leading axes, last axis] has orthonormal
// columns (or rows, when it has fewer rows than columns) times the gain, for Dense and 4-D convolution
// kernels, square or not; the same seed draws the same, another seed and another weight others.
TEST(KerasInitializers, OrthogonalIsOrthogonalTimesTheGain) {
  struct Case {
    Shape input;
    std::string layer;
    int64_t cols;
    double gain;
  };
  const auto dense = [](int units, const char* init) {
    return std::string(R"({"class_name": "Dense", "config": {"name": "w", "units": )") + std::to_string(units) +
           R"(, "kernel_initializer": )" + init + "}}";
  };
  const auto conv = [](int filters, int k, const char* init) {
    return std::string(R"({"class_name": "Conv2D", "config": {"name": "w", "filters": )") + std::to_string(filters) +
           R"(, "kernel_size": )" + std::to_string(k) + R"(, "kernel_initializer": )" + init + "}}";
  };
  const char* gain2 = R"({"class_name": "Orthogonal", "config": {"gain": 2.0, "seed": null}})";
  const Case cases[] = {
      {{7}, dense(5, R"("orthogonal")"), 5, 1.0},        // 7 x 5: orthonormal columns
      {{3}, dense(8, gain2), 8, 2.0},                    // 3 x 8: orthonormal rows
      {{64}, dense(64, gain2), 64, 2.0},                 // square
      {{6, 6, 4}, conv(6, 3, gain2), 6, 2.0},            // (3, 3, 4, 6): 36 x 6
      {{5, 5, 2}, conv(24, 2, R"("orthogonal")"), 24, 1.0},  // (2, 2, 2, 24): 8 x 24
      {{4, 4, 3}, conv(27, 3, R"("orthogonal")"), 27, 1.0},  // (3, 3, 3, 27): 27 x 27
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layer);
    const std::vector<float> w = test::one_layer_model(c.input, c.layer, 3).get_weight("w/kernel");
    EXPECT_LT(orthogonality_error(w, c.cols, c.gain), 1e-5 * c.gain * c.gain);
    EXPECT_EQ(test::one_layer_model(c.input, c.layer, 3).get_weight("w/kernel"), w);
    EXPECT_NE(test::one_layer_model(c.input, c.layer, 4).get_weight("w/kernel"), w);
  }
  // Two weights of one shape in one layer differ: an LSTM of 6 features and 6 units, both kernels orthogonal.
  const Model lstm = test::one_layer_model({4, 6}, R"({"class_name": "LSTM", "config": {"name": "l", "units": 6,
      "kernel_initializer": "orthogonal"}})");
  const std::vector<float> kernel = lstm.get_weight("l/lstm_cell/kernel");
  const std::vector<float> recurrent = lstm.get_weight("l/lstm_cell/recurrent_kernel");
  EXPECT_LT(orthogonality_error(kernel, 24, 1.0), 1e-5);
  EXPECT_LT(orthogonality_error(recurrent, 24, 1.0), 1e-5);
  EXPECT_NE(kernel, recurrent);
  // A weight of one axis has no orthogonal form (Keras raises too).
  const Status bias = test::status_of([] {
    test::one_layer_model({4}, R"({"class_name": "Dense", "config": {"name": "d", "units": 3, "bias_initializer": "orthogonal"}})");
  });
  EXPECT_EQ(bias, Status::InvalidArgument);
}

// EfficientNetB0 as Keras builds it: every convolution's kernel VarianceScaling(2, fan_out, truncated
// normal), the classifier's VarianceScaling(1/3, fan_out, uniform).
TEST(KerasInitializers, EfficientNetB0InitialisesAsKeras) {
  Model m = applications::application(Strategy::mirrored({"cpu"}), "EfficientNetB0",
                                      R"({"input_shape": [32, 32, 3], "classes": 10})");
  CompileOptions o;
  o.seed = 2;
  m.compile(o);
  for (const char* conv : {"top_conv/kernel", "block6a_expand_conv/kernel", "block5a_dwconv/kernel"}) {
    SCOPED_TRACE(conv);
    const Shape s = [&] {
      for (const WeightInfo& w : m.weights())
        if (w.name == conv) return w.shape;
      return Shape{};
    }();
    ASSERT_EQ(s.size(), 4u);
    const double fan_out = static_cast<double>(s[0] * s[1] * s[3]);
    const Moments got = moments_of(m.get_weight(conv));
    EXPECT_NEAR(got.stddev, std::sqrt(2.0 / fan_out), 0.03 * std::sqrt(2.0 / fan_out));
    EXPECT_LE(got.max_abs, 2.0 * std::sqrt(2.0 / fan_out) / 0.87962566103423978);
  }
  const Moments dense = moments_of(m.get_weight("predictions/kernel"));
  EXPECT_LE(dense.max_abs, std::sqrt(3.0 / 3.0 / 10.0));
  EXPECT_NEAR(dense.stddev, std::sqrt(1.0 / 3.0 / 10.0), 0.03 * std::sqrt(1.0 / 3.0 / 10.0));
  const std::string json = m.to_json();
  EXPECT_NE(json.find(R"("depthwise_initializer": {"module": "keras.initializers", "class_name": "VarianceScaling")"),
            std::string::npos);
}

}  // namespace
}  // namespace kx
