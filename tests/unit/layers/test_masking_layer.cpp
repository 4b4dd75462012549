// Masking (keras.layers.Masking): unmasked positions pass unchanged against the float64 reference and
// finite differences; positions all mask_value give zeros, a 0 in the mask and no gradient; NaN
// differs from mask_value; Keras's config both ways; an LSTM after it skips padded steps; two replicas
// train as one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/layers/layer.hpp"
#include "core/model/keras_masks.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

std::unique_ptr<core::Layer> masking(const std::string& config) {
  return core::make_layer(
      core::layer_spec_from_json(json::parse(R"({"class_name": "Masking", "config": )" + config + "}")));
}

size_t at(int64_t i) { return static_cast<size_t>(i); }

TEST(MaskingLayer, MatchesTheReferenceWhereNothingIsMasked) {
  // Random values never equal 0.5 at every feature of a position: the layer is the identity, and the
  // mask it writes is all ones.
  auto layer = masking(R"({"name": "m", "mask_value": 0.5})");
  const auto identity = [](const std::vector<test::Vec>& x, const test::Vec&) { return x[0]; };
  const test::Checked got = test::check_layer(*layer, {{4, 3}}, 3, {}, identity);
  ASSERT_GE(got.scratch.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(got.scratch[i], 1.0f) << i;
}

TEST(MaskingLayer, ZeroesAndMasksPositionsAllMaskValueAndKeepsNan) {
  const float v = -0.25f, nan = std::numeric_limits<float>::quiet_NaN();
  auto layer = masking(R"({"mask_value": -0.25})");
  EXPECT_EQ(layer->build({4, 3}), Shape({4, 3}));
  EXPECT_TRUE(layer->computes_mask());
  EXPECT_FALSE(layer->backward_reads_input());
  EXPECT_FALSE(layer->backward_reads_output());
  const int64_t rows = 2, positions = 8, features = 3;
  std::vector<float> x = test::random_floats(positions * features, 4);
  const std::vector<bool> masked = {false, true, false, true, true, false, false, false};
  for (int64_t p = 0; p < positions; ++p)
    if (masked[at(p)])
      for (int64_t f = 0; f < features; ++f) x[at(p * features + f)] = v;
  x[at(2 * features + 1)] = v;  // one value equal to mask_value: not masked
  x[at(5 * features)] = v, x[at(5 * features + 1)] = v, x[at(5 * features + 2)] = nan;  // NaN != v
  x[at(6 * features + 2)] = std::numeric_limits<float>::infinity();
  std::vector<float> y(x.size(), 7.0f), scratch(at(layer->scratch_floats(rows)), 7.0f);
  ASSERT_EQ(scratch.size(), at(positions));
  auto be = backend::make_cpu_backend(2);
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  c.scratch = scratch.data();
  layer->forward(c);
  for (int64_t p = 0; p < positions; ++p) {
    EXPECT_EQ(scratch[at(p)], masked[at(p)] ? 0.0f : 1.0f) << p;
    for (int64_t f = 0; f < features; ++f) {
      const size_t i = at(p * features + f);
      if (masked[at(p)]) {
        EXPECT_EQ(y[i], 0.0f) << p;
        EXPECT_FALSE(std::signbit(y[i])) << p;  // Keras's where(mask, x, 0), not x * 0
      } else if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << p;
      } else {
        EXPECT_EQ(y[i], x[i]) << p << ", " << f;
      }
    }
  }
  // The gradient: dy where the position counts, 0 where it is masked, also in place.
  std::vector<float> dy = test::random_floats(positions * features, 6), dx(dy.size(), 7.0f);
  dy[at(features)] = std::numeric_limits<float>::infinity();  // on a masked position: no NaN from it
  c.dy = dy.data();
  c.dx = dx.data();
  layer->backward(c);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t f = 0; f < features; ++f) {
      const size_t i = at(p * features + f);
      EXPECT_EQ(dx[i], masked[at(p)] ? 0.0f : dy[i]) << p << ", " << f;
    }
  c.dx = dy.data();
  layer->backward(c);
  EXPECT_EQ(dy, dx);
}

TEST(MaskingLayer, ReadsAndWritesKerasConfig) {
  auto layer = masking(R"({"name": "mask", "mask_value": 2.5, "dtype": "float32"})");
  layer->build({5, 2});
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("config", "").at("mask_value", "").as_number(""), 2.5);
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({5, 2}), Shape({5, 2}));
  EXPECT_EQ(again->to_json().dump(), out.dump());
  // Keras's default.
  auto plain = masking("{}");
  plain->build({3});
  EXPECT_EQ(plain->to_json().at("config", "").at("mask_value", "").as_number(""), 0.0);
  EXPECT_THROW(masking(R"({"mask_value": "zero"})"), Error);
  EXPECT_THROW(masking(R"({"mask_value": [1, 2]})"), Error);
  EXPECT_THROW(masking("{}")->build({}), Error);
}

// The model's last output after Masking and an LSTM, for two samples: the same three steps, padded
// with the mask value at the end and at the start.
std::vector<float> padded_outputs(bool with_masking) {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {5, 2});
  if (with_masking) m.add_layer(R"({"class_name": "Masking", "config": {"mask_value": 0.0}})");
  m.add_layer(R"({"class_name": "LSTM", "config": {"units": 3}})");
  CompileOptions o;
  o.seed = 3;
  m.compile(o);
  const std::vector<float> x = {0.3f, -1.0f, 0.7f, 0.2f, -0.4f, 0.9f, 0, 0, 0, 0,
                                0, 0, 0, 0, 0.3f, -1.0f, 0.7f, 0.2f, -0.4f, 0.9f};
  return m.predict(x.data(), 2);
}

TEST(MaskingLayer, AnLstmAfterItSkipsPaddedSteps) {
  for (const bool with_masking : {true, false}) {
    const std::vector<float> y = padded_outputs(with_masking);
    ASSERT_EQ(y.size(), 6u);
    double diff = 0;
    for (size_t j = 0; j < 3; ++j) diff += std::abs(y[j] - y[3 + j]);
    if (with_masking) {
      EXPECT_LE(diff, 1e-6);
    } else {
      EXPECT_GT(diff, 1e-4);
    }
  }
}

// Keras's Functional graph of Masking(mask_value) -> LSTM: the mask as any(not_equal(x, mask_value),
// axis=-1), handed to the LSTM as its mask argument. Both nodes and the argument go (kx's Masking makes
// the mask); a NotEqual against another value is not Masking's, and stays.
std::string masking_graph(double not_equal_value) {
  const std::string x = R"({"class_name": "__keras_tensor__", "config": {"keras_history": ["input_layer", 0, 0]}})";
  return R"({"class_name": "Functional", "config": {"layers": [
      {"class_name": "InputLayer", "name": "input_layer", "inbound_nodes": []},
      {"class_name": "NotEqual", "name": "not_equal", "inbound_nodes": [{"args": [)" + x + ", " +
         std::to_string(not_equal_value) + R"(], "kwargs": {}}]},
      {"class_name": "Masking", "name": "masking", "config": {"mask_value": 0.5},
       "inbound_nodes": [{"args": [)" + x + R"(], "kwargs": {}}]},
      {"class_name": "Any", "name": "any", "config": {"axis": -1, "keepdims": false}, "inbound_nodes": [{"args": [
         {"class_name": "__keras_tensor__", "config": {"keras_history": ["not_equal", 0, 0]}}], "kwargs": {}}]},
      {"class_name": "LSTM", "name": "lstm", "inbound_nodes": [{"args": [
         {"class_name": "__keras_tensor__", "config": {"keras_history": ["masking", 0, 0]}}], "kwargs": {"mask":
         {"class_name": "__keras_tensor__", "config": {"keras_history": ["any", 0, 0]}}}}]}]}})";
}

TEST(MaskingLayer, KerasMaskNodesOfAFileAreDropped) {
  const std::string kept = core::without_keras_mask_nodes(json::parse(masking_graph(0.5))).dump();
  EXPECT_EQ(kept.find("NotEqual"), std::string::npos) << kept;
  EXPECT_EQ(kept.find("\"Any\""), std::string::npos) << kept;
  EXPECT_EQ(kept.find("\"mask\""), std::string::npos) << kept;
  EXPECT_NE(kept.find("Masking"), std::string::npos) << kept;
  const std::string other = core::without_keras_mask_nodes(json::parse(masking_graph(0.25))).dump();
  EXPECT_NE(other.find("NotEqual"), std::string::npos) << other;
  EXPECT_NE(other.find("\"Any\""), std::string::npos) << other;
}

// ReLU's zeros give single-feature steps all equal to the mask value: each sample masks other steps.
const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "ReLU", "config": {}})",
    R"({"class_name": "Masking", "config": {"mask_value": 0.0}})",
    R"({"class_name": "LSTM", "config": {"units": 4}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

TEST(MaskingLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = test::weights_after_training({6, 1}, kTrainedLayers, 1),
                           two = test::weights_after_training({6, 1}, kTrainedLayers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
