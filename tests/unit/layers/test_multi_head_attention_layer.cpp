// MultiHeadAttention (keras.layers.MultiHeadAttention): forward against a float64 reference and
// backward against finite differences for self- and cross-attention, with and without the causal mask,
// biases, value_dim and output_shape; Keras's JSON config both ways (the call's use_causal_mask in the
// inbound node), what it refuses, and two CPU replicas training as one. Also Dense on sequences.
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

struct Attention {
  int64_t heads, key_dim, value_dim, out;  // out 0: the query's features
  bool bias, causal;
};

// The attention of `rows` samples: query [tq, dq], value [tv, dv], key [tv, dk], weights in Keras's
// order (query/kernel (dq, H, K), query/bias (H, K), key/..., value/..., output kernel (H, V, out), bias).
// mask: the attention mask [rows, tq, tv] (a position attends where it is 1, read as >= 0.5 so that
// finite differences leave it) or null; a row masked throughout attends uniformly (Keras's fused path),
// or nowhere with zero_masked_rows (its Softmax path, with dropout).
Vec reference(const Attention& a, int64_t rows, const Vec& q, const Vec& v, const Vec& k, int64_t tq, int64_t tv,
              int64_t dq, int64_t dv, int64_t dk, const Vec& w, const Vec* mask = nullptr,
              bool zero_masked_rows = false) {
  const int64_t H = a.heads, K = a.key_dim, V = a.value_dim, D = a.out ? a.out : dq;
  size_t at = 0;
  const auto take = [&](int64_t n) {
    const size_t first = at;
    at += static_cast<size_t>(n);
    return first;
  };
  const size_t wq = take(dq * H * K), bq = a.bias ? take(H * K) : 0, wk = take(dk * H * K), bk = a.bias ? take(H * K) : 0;
  const size_t wv = take(dv * H * V), bv = a.bias ? take(H * V) : 0, wo = take(H * V * D), bo = a.bias ? take(D) : 0;
  const auto project = [&](const Vec& x, int64_t t, int64_t in, size_t kernel, size_t bias, int64_t h,
                           int64_t dim, int64_t j) {
    double s = a.bias ? w[bias + static_cast<size_t>(h * dim + j)] : 0.0;
    for (int64_t c = 0; c < in; ++c)
      s += x[static_cast<size_t>(t * in + c)] *
           w[kernel + static_cast<size_t>((c * H + h) * dim + j)];
    return s;
  };
  Vec y(static_cast<size_t>(rows * tq * D), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const Vec qs(q.begin() + r * tq * dq, q.begin() + (r + 1) * tq * dq);
    const Vec vs(v.begin() + r * tv * dv, v.begin() + (r + 1) * tv * dv);
    const Vec ks(k.begin() + r * tv * dk, k.begin() + (r + 1) * tv * dk);
    Vec o(static_cast<size_t>(tq * H * V), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < tq; ++i) {
        std::vector<double> score(static_cast<size_t>(tv));
        double mx = -1e300;
        for (int64_t j = 0; j < tv; ++j) {
          double s = 0;
          for (int64_t e = 0; e < K; ++e)
            s += project(qs, i, dq, wq, bq, h, K, e) * project(ks, j, dk, wk, bk, h, K, e);
          s /= std::sqrt(static_cast<double>(K));
          if (a.causal && j > i) s = -1e300;
          if (mask && (*mask)[static_cast<size_t>((r * tq + i) * tv + j)] < 0.5) s = -1e300;
          score[static_cast<size_t>(j)] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        if (mx <= -1e299) {  // every position masked
          for (double& s : score) s = zero_masked_rows ? 0.0 : 1.0;
          sum = zero_masked_rows ? 1.0 : static_cast<double>(tv);
        } else {
          for (double& s : score) sum += (s = s <= -1e299 ? 0.0 : std::exp(s - mx));
        }
        for (int64_t e = 0; e < V; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < tv; ++j)
            acc += score[static_cast<size_t>(j)] / sum * project(vs, j, dv, wv, bv, h, V, e);
          o[static_cast<size_t>((i * H + h) * V + e)] = acc;
        }
      }
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t d = 0; d < D; ++d) {
        double s = a.bias ? w[bo + static_cast<size_t>(d)] : 0.0;
        for (int64_t hv = 0; hv < H * V; ++hv) s += o[static_cast<size_t>(i * H * V + hv)] * w[wo + static_cast<size_t>(hv * D + d)];
        y[static_cast<size_t>((r * tq + i) * D + d)] = s;
      }
  }
  return y;
}

std::string config_of(const Attention& a) {
  std::string c = R"({"num_heads": )" + std::to_string(a.heads) + R"(, "key_dim": )" + std::to_string(a.key_dim) +
                  R"(, "value_dim": )" + std::to_string(a.value_dim) + R"(, "use_bias": )" + (a.bias ? "true" : "false");
  if (a.out) c += R"(, "output_shape": )" + std::to_string(a.out);
  return c + "}";
}

LayerSpec spec_for(const Attention& a) {
  LayerSpec spec = test::spec_of(LayerKind::MultiHeadAttention, "mha");
  spec.config = config_of(a);
  if (a.causal) spec.call_config = R"({"use_causal_mask": true})";
  return spec;
}

TEST(MultiHeadAttentionLayer, SelfAttentionMatchesTheReferenceAndFiniteDifferences) {
  const Attention cases[] = {
      {2, 3, 3, 0, true, false}, {2, 3, 3, 0, true, true}, {3, 2, 4, 5, false, true}, {1, 4, 2, 0, true, false}};
  for (const Attention& a : cases) {
    SCOPED_TRACE(config_of(a) + (a.causal ? " causal" : ""));
    for (int inputs : {1, 2}) {  // kx's one-input form, and Keras's attention(x, x)
      auto layer = core::make_layer(spec_for(a));
      const int64_t T = 5, F = 6, rows = 2;
      const std::vector<Shape> in(static_cast<size_t>(inputs), Shape{T, F});
      EXPECT_EQ(layer->build_inputs(in), (Shape{T, a.out ? a.out : F}));
      int64_t n = 0;
      for (const core::ParamSpec& p : layer->params()) n += num_elements(p.shape);
      const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 3);
      test::check_layer(*layer, in, rows, w, [&](const std::vector<Vec>& x, const Vec& wd) {
        // Two inputs get different random values from check_layer: the query is x[0], value and key x[1].
        const Vec& value = x.size() > 1 ? x[1] : x[0];
        return reference(a, rows, x[0], value, value, T, T, F, F, F, wd);
      });
    }
  }
}

TEST(MultiHeadAttentionLayer, CrossAttentionMatchesTheReferenceAndFiniteDifferences) {
  const Attention a{2, 3, 2, 0, true, false};
  const int64_t tq = 3, tv = 5, dq = 4, dv = 6, dk = 2, rows = 2;
  for (bool with_key : {false, true}) {
    for (bool causal : {false, true}) {
      Attention b = a;
      b.causal = causal;
      auto layer = core::make_layer(spec_for(b));
      std::vector<Shape> in{{tq, dq}, {tv, dv}};
      if (with_key) in.push_back({tv, dk});
      EXPECT_EQ(layer->build_inputs(in), (Shape{tq, dq}));
      int64_t n = 0;
      for (const core::ParamSpec& p : layer->params()) n += num_elements(p.shape);
      const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 4);
      test::check_layer(*layer, in, rows, w, [&](const std::vector<Vec>& x, const Vec& wd) {
        return reference(b, rows, x[0], x[1], with_key ? x[2] : x[1], tq, tv, dq, dv, with_key ? dk : dv, wd);
      });
    }
  }
}

// The attention_mask as the layer's last input (zeros and ones, a row of zeros among them), alone and
// with the causal mask, for self- and cross-attention: forward and every gradient, the mask's zero.
TEST(MultiHeadAttentionLayer, AttentionMaskInputMatchesTheReferenceAndFiniteDifferences) {
  const int64_t tq = 4, tv = 5, dq = 3, dv = 6, rows = 2;
  std::vector<float> mask(static_cast<size_t>(rows * tq * tv));
  for (size_t n = 0; n < mask.size(); ++n) mask[n] = (n * 7 + n / 3) % 4 == 0 ? 0.0f : 1.0f;
  for (int64_t j = 0; j < tv; ++j) mask[static_cast<size_t>(1 * tv + j)] = 0.0f;  // row 1 of sample 0: all masked
  for (bool cross : {false, true})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(cross ? "cross" : "self") + (causal ? " causal" : ""));
      const Attention a{2, 3, 2, 0, true, causal};
      LayerSpec spec = spec_for(a);
      spec.call_config = std::string(R"({"attention_mask": {"kx_input": )") + (cross ? "2" : "1") + "}" +
                         (causal ? R"(, "use_causal_mask": true})" : "}");
      auto layer = core::make_layer(spec);
      const int64_t steps_v = cross ? tv : tq;
      std::vector<Shape> in{{tq, dq}};
      if (cross) in.push_back({tv, dv});
      in.push_back({tq, steps_v});
      std::vector<float> m(static_cast<size_t>(rows * tq * steps_v));
      for (size_t n = 0; n < m.size(); ++n) m[n] = mask[n % mask.size()];
      EXPECT_EQ(layer->build_inputs(in), (Shape{tq, dq}));
      int64_t n = 0;
      for (const core::ParamSpec& p : layer->params()) n += num_elements(p.shape);
      const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 5);
      std::vector<std::vector<float>> given(in.size());
      given.back() = m;
      const test::Checked r = test::check_layer(
          *layer, in, rows, w,
          [&](const std::vector<Vec>& x, const Vec& wd) {
            const Vec& value = cross ? x[1] : x[0];
            return reference(a, rows, x[0], value, value, tq, steps_v, dq, cross ? dv : dq, cross ? dv : dq, wd,
                             &x.back());
          },
          1e-4, true, {}, given);
      for (float g : r.dxs.back()) ASSERT_EQ(g, 0.0f);
    }
  // The mask's shape must be [query steps, value steps], and the mask the last input.
  LayerSpec spec = spec_for({2, 3, 3, 0, true, false});
  spec.call_config = R"({"attention_mask": {"kx_input": 1}})";
  EXPECT_THROW(core::make_layer(spec)->build_inputs({{4, 3}, {4, 5}}), Error);
  EXPECT_THROW(core::make_layer(spec)->build_inputs({{4, 3}, {4, 4}, {4, 3}}), Error);
  EXPECT_NO_THROW(core::make_layer(spec)->build_inputs({{4, 3}, {4, 4}}));
  spec.call_config = R"({"attention_mask": true})";
  EXPECT_THROW(core::make_layer(spec), Error);
  spec.call_config = R"({"query_mask": {"kx_input": 1}})";
  EXPECT_THROW(core::make_layer(spec), Error);
}

// A Keras 3.15 config of attention(x, x, attention_mask=m, use_causal_mask=True), m a Dense's output:
// the mask is the layer's last input, and kx writes it back as Keras's kwargs tensor.
TEST(MultiHeadAttentionLayer, FunctionalConfigCarriesTheAttentionMaskBothWays) {
  const std::string keras = R"({"class_name": "Functional", "config": {"name": "f", "layers": [
    {"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [null, 4, 3], "name": "x"}, "inbound_nodes": []},
    {"class_name": "Dense", "name": "m", "config": {"name": "m", "units": 4, "activation": "relu"},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}}], "kwargs": {}}]},
    {"class_name": "MultiHeadAttention", "name": "mha", "config": {"name": "mha", "num_heads": 2, "key_dim": 3},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}},
                                 {"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}}],
                        "kwargs": {"attention_mask": {"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 4],
                                   "dtype": "float32", "keras_history": ["m", 0, 0]}}, "use_causal_mask": true}}]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["mha", 0, 0]]}})";
  Model m = Model::from_json(Strategy::mirrored({"cpu"}), keras);
  EXPECT_EQ(m.output_shape(), (Shape{4, 3}));
  const std::string written = m.to_json();
  const json::Value root = json::parse(written);
  const json::Value& call = root.at("config", "").at("layers", "").as_array("")[2].at("inbound_nodes", "").as_array("")[0];
  EXPECT_EQ(call.at("args", "").as_array("").size(), 2u);
  EXPECT_TRUE(call.at("kwargs", "").at("use_causal_mask", "").as_bool(""));
  EXPECT_EQ(call.at("kwargs", "").at("attention_mask", "").at("config", "").at("keras_history", "").as_array("")[0].as_string(""),
            "m");
  EXPECT_EQ(Model::from_json(Strategy::mirrored({"cpu"}), written).to_json(), written);
  // The same through the C++ form of kx_model_add_layer: the kwargs tensor names its layer.
  Model f = Model::functional(Strategy::mirrored({"cpu"}), {4, 3}, "x");
  f.add_layer(R"({"class_name": "Dense", "config": {"name": "m", "units": 4, "activation": "relu"}})", {"x"});
  f.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"name": "mha", "num_heads": 2, "key_dim": 3},
                  "kwargs": {"use_causal_mask": true, "attention_mask": {"class_name": "__keras_tensor__",
                             "config": {"keras_history": ["m", 0, 0]}}}})",
              {"x", "x"});
  EXPECT_EQ(f.to_json(), written);
  // A tensor by a keyword kx does not take is refused, naming it.
  Model g = Model::functional(Strategy::mirrored({"cpu"}), {4, 3}, "x");
  try {
    g.add_layer(R"({"class_name": "Dense", "config": {"units": 4},
                    "kwargs": {"mask": {"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}}}})",
                {"x"});
    ADD_FAILURE() << "a tensor keyword Dense does not take was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("mask"), std::string::npos) << e.what();
  }
}

TEST(MultiHeadAttentionLayer, HasKerasWeightNamesShapesAndFilePaths) {
  auto layer = core::make_layer(spec_for({4, 8, 8, 0, true, false}));
  layer->build_inputs({{10, 16}, {10, 16}});
  const std::vector<core::ParamSpec> p = layer->params();
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0].name, "query/kernel");
  EXPECT_EQ(p[0].shape, (Shape{16, 4, 8}));
  EXPECT_EQ(p[0].keras_file_path, "query_dense/vars/0");
  EXPECT_EQ(p[1].name, "query/bias");
  EXPECT_EQ(p[1].shape, (Shape{4, 8}));
  EXPECT_EQ(p[2].name, "key/kernel");
  EXPECT_EQ(p[4].name, "value/kernel");
  EXPECT_EQ(p[5].keras_file_path, "value_dense/vars/1");
  EXPECT_EQ(p[6].name, "attention_output/kernel");
  EXPECT_EQ(p[6].shape, (Shape{4, 8, 16}));
  EXPECT_EQ(p[7].name, "attention_output/bias");
  EXPECT_EQ(p[7].shape, (Shape{16}));
}

TEST(MultiHeadAttentionLayer, ReadsAndWritesKerasConfig) {
  // As Keras 3.15 writes keras.layers.MultiHeadAttention(2, 4) (initializers left out).
  const std::string keras = R"({"class_name": "MultiHeadAttention", "config": {"name": "mha", "trainable": true,
      "num_heads": 2, "key_dim": 4, "value_dim": 4, "dropout": 0.1, "use_bias": true, "use_gate": false,
      "output_shape": null, "attention_axes": [1], "sliding_window": null, "seed": null}})";
  const LayerSpec spec = core::layer_spec_from_json(json::parse(keras));
  EXPECT_EQ(spec.kind, LayerKind::MultiHeadAttention);
  auto layer = core::make_layer(spec);
  EXPECT_EQ(layer->build_inputs({{6, 8}, {6, 8}}), (Shape{6, 8}));
  const json::Value out = layer->to_json();
  const json::Value& config = out.at("config", "");
  EXPECT_EQ(config.at("num_heads", "").as_int(""), 2);
  EXPECT_EQ(config.at("key_dim", "").as_int(""), 4);
  EXPECT_DOUBLE_EQ(config.at("dropout", "").as_number(""), 0.1);
  EXPECT_TRUE(config.at("output_shape", "").is_null());
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build_inputs({{6, 8}, {6, 8}}), (Shape{6, 8}));
  EXPECT_EQ(again->params().size(), 8u);
}

TEST(MultiHeadAttentionLayer, RefusesWhatKerasRefusesAndSaysWhatKxLacks) {
  const auto status = [](const std::string& config, const std::vector<Shape>& in = {{4, 6}, {4, 6}}) {
    return test::status_of([&] {
      auto l = core::make_layer(
          core::layer_spec_from_json(json::parse(R"({"class_name": "MultiHeadAttention", "config": )" + config + "}")));
      l->build_inputs(in);
    });
  };
  EXPECT_EQ(status(R"({})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 2})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 0, "key_dim": 2})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2, "dropout": 1.0})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2, "use_gate": true})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2, "attention_axes": [2]})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2, "output_shape": [3, 4]})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2})", {{4, 6}, {5, 6}, {4, 6}}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2})", {{6}}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2})", {{4, 6}, {4, 6}, {4, 6}, {4, 6}}), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"num_heads": 2, "key_dim": 2, "output_shape": 3})"), Status::Ok);
}

TEST(MultiHeadAttentionLayer, FunctionalConfigCarriesTheCausalMaskBothWays) {
  // A Keras 3.15 functional config: attention(x, x, use_causal_mask=True), then the output's Dense.
  const std::string keras = R"({"class_name": "Functional", "config": {"name": "f", "layers": [
    {"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [null, 5, 4], "name": "x"}, "inbound_nodes": []},
    {"class_name": "MultiHeadAttention", "name": "mha", "config": {"name": "mha", "num_heads": 2, "key_dim": 3},
     "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}},
                                 {"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}}],
                        "kwargs": {"use_causal_mask": true}}]},
    {"class_name": "Flatten", "name": "flat", "config": {"name": "flat"},
     "inbound_nodes": [[["mha", 0, 0, {}]]]},
    {"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 2}, "inbound_nodes": [[["flat", 0, 0, {}]]]}],
    "input_layers": [["x", 0, 0]], "output_layers": [["out", 0, 0]]}})";
  Model m = Model::from_json(Strategy::mirrored({"cpu"}), keras);
  // 4 projections of 2 heads x 3 (kernels 4x2x3, biases 2x3; the output's 2x3x4 and 4), then 20 x 2 + 2.
  const int64_t attention = 3 * (4 * 6 + 6) + (6 * 4 + 4);
  EXPECT_EQ(m.num_params(), attention + 20 * 2 + 2);
  const std::string summary = m.summary();
  EXPECT_NE(summary.find("MultiHeadAttention"), std::string::npos) << summary;
  EXPECT_NE(summary.find(std::to_string(attention)), std::string::npos) << summary;
  const std::string written = m.to_json();
  const json::Value root = json::parse(written);
  const json::Value& mha = root.at("config", "").at("layers", "").as_array("")[1];
  const json::Value& call = mha.at("inbound_nodes", "").as_array("")[0];
  EXPECT_TRUE(call.at("kwargs", "").at("use_causal_mask", "").as_bool(""));
  EXPECT_EQ(call.at("args", "").as_array("").size(), 2u);
  EXPECT_EQ(Model::from_json(Strategy::mirrored({"cpu"}), written).to_json(), written);
}

TEST(DenseLayer, TransformsEachPositionOfASequence) {
  LayerSpec spec = test::spec_of(LayerKind::Dense, "d");
  spec.units = 3;
  spec.activation = Activation::Tanh;
  auto layer = core::make_layer(spec);
  const int64_t T = 4, F = 5, rows = 2;
  EXPECT_EQ(layer->build({T, F}), (Shape{T, 3}));
  const std::vector<float> w = test::random_floats(static_cast<size_t>(F * 3 + 3), 9);
  test::check_layer(*layer, {{T, F}}, rows, w, [&](const std::vector<Vec>& x, const Vec& wd) {
    Vec y(static_cast<size_t>(rows * T * 3));
    for (int64_t p = 0; p < rows * T; ++p)
      for (int64_t u = 0; u < 3; ++u) {
        double s = wd[static_cast<size_t>(F * 3 + u)];
        for (int64_t c = 0; c < F; ++c) s += x[0][static_cast<size_t>(p * F + c)] * wd[static_cast<size_t>(c * 3 + u)];
        y[static_cast<size_t>(p * 3 + u)] = std::tanh(s);
      }
    return y;
  });
}

// Keras masks of the inputs (Embedding's mask_zero upstream): the attention mask is the query's mask
// times the value's (and the key's when a key is given) per position pair, ANDed with attention_mask
// and use_causal_mask; a query step masked throughout attends uniformly (Keras's fused path). Forward
// against the reference given that AND, every gradient by finite differences, and the output carrying
// the query's mask.
TEST(MultiHeadAttentionLayer, KerasMasksOfTheInputsMatchTheReferenceAndFiniteDifferences) {
  const int64_t tq = 4, tv = 5, dq = 3, dv = 6, dk = 2, rows = 2;
  // Holes, padding at the end, and a query step masked in every sample.
  const std::vector<float> query_mask{1, 1, 0, 1, 1, 0, 0, 1}, value_mask{0, 1, 1, 1, 0, 1, 1, 1, 0, 0},
      key_mask{1, 1, 0, 1, 1, 1, 0, 1, 1, 1};
  std::vector<float> attention(static_cast<size_t>(rows * tq * tv));
  for (size_t n = 0; n < attention.size(); ++n) attention[n] = n % 5 == 2 ? 0.0f : 1.0f;
  struct Case {
    const char* name;
    bool cross, key, q, v, k, attention, causal;
  };
  const Case cases[] = {
      {"self, one input", false, false, true, false, false, false, false},
      {"self, one input, causal", false, false, true, false, false, false, true},
      {"cross, query mask", true, false, true, false, false, false, false},
      {"cross, value mask", true, false, false, true, false, false, false},
      {"cross, both", true, false, true, true, false, false, false},
      {"cross, key mask", true, true, false, true, true, false, false},
      {"cross, all and attention_mask", true, true, true, true, true, true, false},
      {"cross, query mask, attention_mask, causal", true, false, true, false, false, true, true},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const Attention a{2, 3, 2, 0, true, k.causal};
    const int64_t steps_v = k.cross ? tv : tq;
    LayerSpec spec = spec_for(a);
    std::vector<Shape> in{{tq, dq}};
    if (k.cross) in.push_back({tv, dv});
    if (k.key) in.push_back({tv, dk});
    if (k.attention) {
      spec.call_config = R"({"attention_mask": {"kx_input": )" + std::to_string(in.size()) + "}" +
                         (k.causal ? R"(, "use_causal_mask": true})" : "}");
      in.push_back({tq, steps_v});
    }
    auto layer = core::make_layer(spec);
    EXPECT_TRUE(layer->passes_mask());
    std::vector<std::vector<float>> masks(in.size()), given(in.size());
    if (k.q) masks[0] = query_mask;
    if (k.v) masks[1] = value_mask;
    if (k.k) masks[2] = key_mask;
    if (k.attention) given.back() = attention;
    // The AND of every mask per position pair (self-attention: the query's mask is the value's).
    Vec both(static_cast<size_t>(rows * tq * steps_v), 1.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = 0; j < steps_v; ++j) {
          double m = 1;
          if (k.q) m *= query_mask[static_cast<size_t>(r * tq + i)];
          if (k.q && !k.cross) m *= query_mask[static_cast<size_t>(r * tq + j)];
          if (k.v) m *= value_mask[static_cast<size_t>(r * tv + j)];
          if (k.k) m *= key_mask[static_cast<size_t>(r * tv + j)];
          const size_t at = static_cast<size_t>((r * tq + i) * steps_v + j);
          if (k.attention) m *= attention[at];
          both[at] = m;
        }
    int64_t n = 0;
    EXPECT_EQ(layer->build_inputs(in), (Shape{tq, dq}));
    for (const core::ParamSpec& p : layer->params()) n += num_elements(p.shape);
    const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 6);
    test::check_layer(
        *layer, in, rows, w,
        [&](const std::vector<Vec>& x, const Vec& wd) {
          const Vec& value = k.cross ? x[1] : x[0];
          const Vec& key = k.key ? x[2] : value;
          return reference(a, rows, x[0], value, key, tq, steps_v, dq, k.cross ? dv : dq, k.key ? dk : (k.cross ? dv : dq),
                           wd, &both);
        },
        1e-4, true, {}, given, masks);
  }
}

// Self-attention with dropout and the causal mask, then the classifier: the mask drawn from the
// global batch's rows, so two replicas train as one.
const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "Dense", "config": {"units": 6}})",
    R"({"class_name": "MultiHeadAttention", "config": {"num_heads": 2, "key_dim": 3, "dropout": 0.2}})",
    R"({"class_name": "LayerNormalization", "config": {}})",
    R"({"class_name": "Flatten", "config": {}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

TEST(MultiHeadAttentionLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = test::weights_after_training({5, 4}, kTrainedLayers, 1);
  const std::vector<float> two = test::weights_after_training({5, 4}, kTrainedLayers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
