// Keras's initializers in the configs of LSTM, GRU, Bidirectional, SeparableConv2D, Conv2DTranspose,
// BatchNormalization, LayerNormalization, Embedding and MultiHeadAttention: each weight a compiled model
// draws is its key's initializer with Keras's fans for the weight's shape (Keras's LSTM forget-gate
// layout, EinsumDense's axes for the attention kernels), the recurrent kernel is orthogonal by
// default as in Keras, configs round trip, and bad settings are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kx/model.hpp"
#include "layer_check.hpp"

namespace kx {
namespace {

std::vector<float> slice(const std::vector<float>& v, size_t from, size_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + count)};
}

bool all_equal(const std::vector<float>& v, float value) {
  for (float x : v)
    if (x != value) return false;
  return !v.empty();
}

double stddev(const std::vector<float>& v) {
  double mean = 0, sq = 0;
  for (float x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (float x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size()));
}

// max |W W^T - I| for W [rows, cols] with rows <= cols (a recurrent kernel [units, G units]).
double rows_orthonormal_error(const std::vector<float>& w, int64_t cols) {
  const auto rows = static_cast<int64_t>(w.size()) / cols;
  double worst = 0;
  for (int64_t a = 0; a < rows; ++a)
    for (int64_t b = 0; b < rows; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < cols; ++i)
        dot += static_cast<double>(w[static_cast<size_t>(a * cols + i)]) * w[static_cast<size_t>(b * cols + i)];
      worst = std::max(worst, std::fabs(dot - (a == b ? 1.0 : 0.0)));
    }
  return worst;
}

// he_normal's deviation, sqrt(2 / fan_in), within 10%: the sample deviations here are within 3% of
// theirs (over 800 values or more), and every other fan a layer could take is off by 40% or more.
void expect_he_normal(const std::vector<float>& w, double fan_in) {
  EXPECT_NEAR(stddev(w), std::sqrt(2.0 / fan_in), 0.1 * std::sqrt(2.0 / fan_in));
}

TEST(LayerInitializers, RecurrentKernelsAreOrthogonalByDefault) {
  for (const char* cls : {"LSTM", "GRU"}) {
    SCOPED_TRACE(cls);
    const Model m = test::one_layer_model({5, 3}, std::string(R"({"class_name": ")") + cls + R"(", "config": {"name": "r", "units": 8}})");
    const std::string cell = std::string(cls) == "LSTM" ? "r/lstm_cell/" : "r/gru_cell/";
    const int64_t g = (std::string(cls) == "LSTM" ? 4 : 3) * 8;
    EXPECT_LT(rows_orthonormal_error(m.get_weight(cell + "recurrent_kernel"), g), 1e-5);
    // The kernel stays Glorot-uniform: within sqrt(6 / (3 + g)), and not orthogonal.
    const std::vector<float> kernel = m.get_weight(cell + "kernel");
    for (float k : kernel) EXPECT_LE(std::fabs(k), std::sqrt(6.0 / (3.0 + static_cast<double>(g))));
    EXPECT_GT(rows_orthonormal_error(kernel, g), 0.05);
  }
  const Model bi = test::one_layer_model({5, 3}, R"({"class_name": "Bidirectional", "config": {"name": "b", "layer":
      {"class_name": "GRU", "config": {"name": "gru", "units": 4}}}})");
  const std::vector<float> forward = bi.get_weight("b/forward_gru/gru_cell/recurrent_kernel");
  const std::vector<float> backward = bi.get_weight("b/backward_gru/gru_cell/recurrent_kernel");
  EXPECT_LT(rows_orthonormal_error(forward, 12), 1e-5);
  EXPECT_LT(rows_orthonormal_error(backward, 12), 1e-5);
  EXPECT_NE(forward, backward);
}

TEST(LayerInitializers, RecurrentLayersDrawTheirConfiguredInitializers) {
  // LSTM with unit_forget_bias: Keras's bias is bias_initializer((u,)), ones((u,)), bias_initializer((2u,)).
  const int64_t u = 6;
  const Model lstm = test::one_layer_model({4, 5}, R"({"class_name": "LSTM", "config": {"name": "l", "units": 6,
      "kernel_initializer": "ones", "recurrent_initializer": {"class_name": "Constant", "config": {"value": -2.0}},
      "bias_initializer": {"class_name": "Constant", "config": {"value": 0.5}}}})");
  EXPECT_TRUE(all_equal(lstm.get_weight("l/lstm_cell/kernel"), 1.0f));
  EXPECT_TRUE(all_equal(lstm.get_weight("l/lstm_cell/recurrent_kernel"), -2.0f));
  const std::vector<float> bias = lstm.get_weight("l/lstm_cell/bias");
  EXPECT_TRUE(all_equal(slice(bias, 0, u), 0.5f));
  EXPECT_TRUE(all_equal(slice(bias, u, u), 1.0f));
  EXPECT_TRUE(all_equal(slice(bias, 2 * u, 2 * u), 0.5f));
  const Model plain = test::one_layer_model({4, 5}, R"({"class_name": "LSTM", "config": {"name": "l", "units": 6,
      "unit_forget_bias": false, "bias_initializer": "ones"}})");
  EXPECT_TRUE(all_equal(plain.get_weight("l/lstm_cell/bias"), 1.0f));
  // Each part of the forget-gate layout has its own fans: he_normal over 400 and 800 values.
  const Model parts = test::one_layer_model({2, 3}, R"({"class_name": "LSTM", "config": {"name": "l", "units": 400,
      "bias_initializer": "he_normal"}})");
  const std::vector<float> b = parts.get_weight("l/lstm_cell/bias");
  expect_he_normal(slice(b, 0, 400), 400);
  EXPECT_TRUE(all_equal(slice(b, 400, 400), 1.0f));
  expect_he_normal(slice(b, 800, 800), 800);
  // GRU: he_normal on the kernel [features, 3 units] (fan_in: features), a constant bias [2, 3 units].
  const Model gru = test::one_layer_model({3, 300}, R"({"class_name": "GRU", "config": {"name": "g", "units": 20,
      "kernel_initializer": {"class_name": "HeNormal", "config": {"seed": 3}}, "bias_initializer":
      {"class_name": "Constant", "config": {"value": 0.25}}, "recurrent_initializer": "zeros"}})");
  expect_he_normal(gru.get_weight("g/gru_cell/kernel"), 300);
  EXPECT_TRUE(all_equal(gru.get_weight("g/gru_cell/bias"), 0.25f));
  EXPECT_TRUE(all_equal(gru.get_weight("g/gru_cell/recurrent_kernel"), 0.0f));
  // Bidirectional: each direction's config.
  const Model bi = test::one_layer_model({4, 3}, R"({"class_name": "Bidirectional", "config": {"name": "b",
      "layer": {"class_name": "LSTM", "config": {"name": "lstm", "units": 2, "kernel_initializer": "ones"}},
      "backward_layer": {"class_name": "LSTM", "config": {"name": "backward_lstm", "units": 2, "go_backwards": true,
      "kernel_initializer": {"class_name": "Constant", "config": {"value": 3.0}}, "bias_initializer": "ones"}}}})");
  EXPECT_TRUE(all_equal(bi.get_weight("b/forward_lstm/lstm_cell/kernel"), 1.0f));
  EXPECT_TRUE(all_equal(bi.get_weight("b/backward_lstm/lstm_cell/kernel"), 3.0f));
  EXPECT_TRUE(all_equal(bi.get_weight("b/backward_lstm/lstm_cell/bias"), 1.0f));
}

TEST(LayerInitializers, ConvolutionsDrawTheirConfiguredInitializers) {
  const Model sep = test::one_layer_model({6, 6, 3}, R"({"class_name": "SeparableConv2D", "config": {"name": "s", "filters": 4,
      "kernel_size": 3, "depth_multiplier": 2, "depthwise_initializer": "ones", "pointwise_initializer":
      {"class_name": "Constant", "config": {"value": 2.0}}, "bias_initializer": {"class_name": "Constant",
      "config": {"value": 3.0}}}})");
  EXPECT_TRUE(all_equal(sep.get_weight("s/depthwise_kernel"), 1.0f));
  EXPECT_TRUE(all_equal(sep.get_weight("s/pointwise_kernel"), 2.0f));
  EXPECT_TRUE(all_equal(sep.get_weight("s/bias"), 3.0f));
  // he_normal on the pointwise kernel (1, 1, 64 * 2, 32): fan_in 128; the depthwise one (3, 3, 64, 2): 9 * 64.
  const Model wide = test::one_layer_model({5, 5, 64}, R"({"class_name": "SeparableConv2D", "config": {"name": "s", "filters": 32,
      "kernel_size": 3, "depth_multiplier": 2, "depthwise_initializer": "he_normal", "pointwise_initializer": "he_normal"}})");
  expect_he_normal(wide.get_weight("s/depthwise_kernel"), 9 * 64);
  expect_he_normal(wide.get_weight("s/pointwise_kernel"), 128);
  // Conv2DTranspose's kernel (3, 3, filters 16, channels 40): fan_in 9 * 16 (Keras's compute_fans).
  const Model up = test::one_layer_model({4, 4, 40}, R"({"class_name": "Conv2DTranspose", "config": {"name": "t", "filters": 16,
      "kernel_size": 3, "strides": 2, "kernel_initializer": "he_normal", "bias_initializer": "ones"}})");
  expect_he_normal(up.get_weight("t/kernel"), 9 * 16);
  EXPECT_TRUE(all_equal(up.get_weight("t/bias"), 1.0f));
}

TEST(LayerInitializers, NormalizationsAndEmbeddingDrawTheirConfiguredInitializers) {
  const auto constant = [](double v) {
    return R"({"class_name": "Constant", "config": {"value": )" + std::to_string(v) + "}}";
  };
  const Model bn = test::one_layer_model({4, 4, 3}, R"({"class_name": "BatchNormalization", "config": {"name": "n",
      "gamma_initializer": )" + constant(2) + R"(, "beta_initializer": )" + constant(3) +
                                            R"(, "moving_mean_initializer": )" + constant(4) +
                                            R"(, "moving_variance_initializer": )" + constant(5) + "}}");
  EXPECT_TRUE(all_equal(bn.get_weight("n/gamma"), 2.0f));
  EXPECT_TRUE(all_equal(bn.get_weight("n/beta"), 3.0f));
  EXPECT_TRUE(all_equal(bn.get_weight("n/moving_mean"), 4.0f));
  EXPECT_TRUE(all_equal(bn.get_weight("n/moving_variance"), 5.0f));
  const Model ln = test::one_layer_model({5, 6}, R"({"class_name": "LayerNormalization", "config": {"name": "n",
      "gamma_initializer": "zeros", "beta_initializer": )" + constant(-1) + "}}");
  EXPECT_TRUE(all_equal(ln.get_weight("n/gamma"), 0.0f));
  EXPECT_TRUE(all_equal(ln.get_weight("n/beta"), -1.0f));
  const Model only_beta = test::one_layer_model({5, 6}, R"({"class_name": "LayerNormalization", "config": {"name": "n",
      "scale": false, "gamma_initializer": "zeros", "beta_initializer": "ones"}})");
  EXPECT_TRUE(all_equal(only_beta.get_weight("n/beta"), 1.0f));
  // Embedding: Keras's default RandomUniform(-0.05, 0.05) (deviation 0.05 / sqrt(3)), or the config's.
  const std::vector<float> uniform =
      test::one_layer_model({4}, R"({"class_name": "Embedding", "config": {"name": "e", "input_dim": 200, "output_dim": 16}})")
          .get_weight("e/embeddings");
  for (float v : uniform) EXPECT_LE(std::fabs(v), 0.05f);
  EXPECT_NEAR(stddev(uniform), 0.05 / std::sqrt(3.0), 0.003);
  const std::vector<float> normal = test::one_layer_model({4}, R"({"class_name": "Embedding", "config": {"name": "e",
      "input_dim": 200, "output_dim": 16, "embeddings_initializer": {"class_name": "RandomNormal",
      "config": {"mean": 0.0, "stddev": 1.0}}}})").get_weight("e/embeddings");
  EXPECT_NEAR(stddev(normal), 1.0, 0.05);
}

// Keras's EinsumDense gives the attention kernels the fans of their einsum axes: query/key/value
// (in, heads, dim) fan_in in and fan_out heads * dim; the output (heads, dim, out) heads * dim and out.
TEST(LayerInitializers, AttentionKernelsHaveKerasEinsumFans) {
  const int64_t in = 40, heads = 4, key_dim = 50, value_dim = 30;
  const std::string config = R"("num_heads": 4, "key_dim": 50, "value_dim": 30)";
  const Model glorot = test::one_layer_model({6, in}, R"({"class_name": "MultiHeadAttention", "config": {"name": "a", )" + config + "}}");
  const auto glorot_deviation = [](double fan_in, double fan_out) { return std::sqrt(2.0 / (fan_in + fan_out)); };
  for (const auto& [weight, fan_in, fan_out] :
       {std::tuple{"a/query/kernel", in, heads * key_dim}, std::tuple{"a/value/kernel", in, heads * value_dim},
        std::tuple{"a/attention_output/kernel", heads * value_dim, in}}) {
    SCOPED_TRACE(weight);
    const double want = glorot_deviation(static_cast<double>(fan_in), static_cast<double>(fan_out));
    EXPECT_NEAR(stddev(glorot.get_weight(weight)), want, 0.05 * want);
  }
  const Model he = test::one_layer_model({6, in}, R"({"class_name": "MultiHeadAttention", "config": {"name": "a", )" + config +
                                          R"(, "kernel_initializer": "he_normal", "bias_initializer": "ones"}})");
  expect_he_normal(he.get_weight("a/key/kernel"), in);
  expect_he_normal(he.get_weight("a/attention_output/kernel"), heads * value_dim);
  for (const char* bias : {"a/query/bias", "a/key/bias", "a/value/bias", "a/attention_output/bias"})
    EXPECT_TRUE(all_equal(he.get_weight(bias), 1.0f)) << bias;
  // Axes given in the config are Keras's to keep: fan_in over axes 0 and 1 of the query kernel.
  const Model axes = test::one_layer_model({6, in}, R"({"class_name": "MultiHeadAttention", "config": {"name": "a", )" + config +
                                            R"(, "kernel_initializer": {"class_name": "HeNormal", "config":
                                            {"input_axes": [0, 1], "output_axes": [2]}}}})");
  expect_he_normal(axes.get_weight("a/query/kernel"), in * heads);
}

TEST(LayerInitializers, ConfigsRoundTripAndDrawTheSameWeights) {
  const std::pair<Shape, const char*> layers[] = {
      {{4, 3}, R"({"class_name": "LSTM", "config": {"name": "l", "units": 3, "kernel_initializer": "he_uniform",
          "recurrent_initializer": {"class_name": "Orthogonal", "config": {"gain": 0.5, "seed": null}},
          "bias_initializer": {"class_name": "RandomNormal", "config": {"stddev": 0.1}}}})"},
      {{4, 3}, R"({"class_name": "GRU", "config": {"name": "g", "units": 3, "recurrent_initializer": "glorot_normal"}})"},
      {{4, 3}, R"({"class_name": "Bidirectional", "config": {"name": "b", "layer": {"class_name": "LSTM",
          "config": {"name": "lstm", "units": 2, "bias_initializer": "ones", "recurrent_initializer": "zeros"}}}})"},
      {{5, 5, 2}, R"({"class_name": "SeparableConv2D", "config": {"name": "s", "filters": 3, "kernel_size": 3,
          "pointwise_initializer": "lecun_normal", "bias_initializer": "ones"}})"},
      {{3, 3, 2}, R"({"class_name": "Conv2DTranspose", "config": {"name": "t", "filters": 3, "kernel_size": 2,
          "kernel_initializer": "he_normal"}})"},
      {{4, 2}, R"({"class_name": "BatchNormalization", "config": {"name": "n", "moving_variance_initializer": "zeros"}})"},
      {{4, 2}, R"({"class_name": "LayerNormalization", "config": {"name": "n", "beta_initializer": "ones"}})"},
      {{4}, R"({"class_name": "Embedding", "config": {"name": "e", "input_dim": 9, "output_dim": 2,
          "embeddings_initializer": "glorot_uniform"}})"},
      {{4, 6}, R"({"class_name": "MultiHeadAttention", "config": {"name": "a", "num_heads": 2, "key_dim": 3,
          "kernel_initializer": "lecun_uniform", "bias_initializer": "ones"}})"},
  };
  for (const auto& [shape, layer] : layers) {
    SCOPED_TRACE(layer);
    const Model m = test::one_layer_model(shape, layer, 5);
    const std::string json = m.to_json();
    EXPECT_NE(json.find(R"("module": "keras.initializers")"), std::string::npos) << json;
    Model back = Model::from_json(Strategy::mirrored({"cpu"}), json);
    EXPECT_EQ(back.to_json(), json);
    CompileOptions o;
    o.seed = 5;
    back.compile(o);
    EXPECT_EQ(back.get_weights(), m.get_weights());
  }
}

TEST(LayerInitializers, RefusesBadInitializersAndRegularizersByName) {
  const auto status = [](const Shape& shape, const std::string& layer) {
    return test::status_of([&] { test::one_layer_model(shape, layer); });
  };
  EXPECT_EQ(status({4, 3}, R"({"class_name": "LSTM", "config": {"units": 2, "recurrent_initializer": "identity"}})"),
            Status::Unsupported);
  EXPECT_EQ(status({4, 3}, R"({"class_name": "GRU", "config": {"units": 2, "kernel_initializer":
      {"class_name": "VarianceScaling", "config": {"mode": "fan_sideways"}}}})"), Status::InvalidArgument);
  EXPECT_EQ(status({4, 3}, R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "LSTM",
      "config": {"units": 2, "bias_initializer": {"class_name": "Custom", "config": {}}}}}})"), Status::Unsupported);
  EXPECT_EQ(status({4, 2}, R"({"class_name": "BatchNormalization", "config": {"gamma_initializer":
      {"class_name": "RandomNormal", "config": {"stddev": -1}}}})"), Status::InvalidArgument);
  EXPECT_EQ(status({4, 2}, R"({"class_name": "LayerNormalization", "config": {"beta_initializer": "orthogonal"}})"),
            Status::InvalidArgument);  // a vector has no orthogonal form
  EXPECT_EQ(status({4}, R"({"class_name": "Embedding", "config": {"input_dim": 5, "output_dim": 2,
      "embeddings_initializer": 0.05}})"), Status::InvalidArgument);
  EXPECT_EQ(status({4, 6}, R"({"class_name": "MultiHeadAttention", "config": {"num_heads": 2, "key_dim": 3,
      "kernel_initializer": "bogus"}})"), Status::Unsupported);
  EXPECT_EQ(status({5, 5, 2}, R"({"class_name": "SeparableConv2D", "config": {"filters": 2, "kernel_size": 3,
      "pointwise_initializer": {"class_name": "STFT", "config": {}}}})"), Status::Unsupported);
  // Regularizers and constraints: kx trains without them, so it refuses them (a wrapped layer's too).
  EXPECT_EQ(status({4, 3}, R"({"class_name": "LSTM", "config": {"units": 2, "kernel_regularizer": "l2"}})"),
            Status::Unsupported);
  EXPECT_EQ(status({4, 3}, R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "GRU",
      "config": {"units": 2, "recurrent_constraint": {"class_name": "NonNeg", "config": {}}}}}})"), Status::Unsupported);
  EXPECT_EQ(status({4, 2}, R"({"class_name": "BatchNormalization", "config": {"gamma_regularizer": null,
      "beta_constraint": null}})"), Status::Ok);
  try {
    test::one_layer_model({4, 6}, R"({"class_name": "MultiHeadAttention", "config": {"name": "att", "num_heads": 2,
        "key_dim": 3, "bias_initializer": "bogus"}})");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("att"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bias_initializer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kx
