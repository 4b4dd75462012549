// Reshape (keras.layers.Reshape): the output is the input reshaped (one size inferred from -1), Keras's
// JSON config both ways, and what it refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

LayerSpec reshape_to(const char* target) {
  LayerSpec spec = test::spec_of(LayerKind::Reshape, "reshape");
  spec.config = std::string(R"({"target_shape": )") + target + "}";
  return spec;
}

TEST(ReshapeLayer, InfersTheUnknownSizeAndAliasesItsInput) {
  auto layer = core::make_layer(reshape_to("[1, 1, -1]"));
  EXPECT_EQ(layer->build({12}), (Shape{1, 1, 12}));
  EXPECT_TRUE(layer->aliases_input());
  auto fixed = core::make_layer(reshape_to("[3, 4]"));
  EXPECT_EQ(fixed->build({2, 6}), (Shape{3, 4}));
}

TEST(ReshapeLayer, TrainsInAModel) {
  Model m = Model::sequential(Strategy::mirrored({"cpu"}), {6});
  m.add_layer(R"({"class_name": "Reshape", "config": {"target_shape": [2, 3]}})");
  m.add_layer(R"({"class_name": "Reshape", "config": {"target_shape": [-1]}})");
  m.add_layer(R"({"class_name": "Dense", "config": {"units": 4}})");
  CompileOptions o;
  o.loss.kind = LossKind::MeanSquaredError;
  m.compile(o);
  const std::vector<float> x = test::random_floats(8 * 6, 1), y = test::random_floats(8 * 4, 2);
  const std::vector<float> before = m.predict(x.data(), 8);
  ASSERT_EQ(before.size(), 8u * 4u);
  m.train_on_batch(x.data(), y.data(), 8);
  EXPECT_NE(m.predict(x.data(), 8), before);
}

TEST(ReshapeLayer, ReadsAndWritesKerasConfig) {
  const std::string keras = R"({"class_name": "Reshape", "config": {"name": "reshape", "trainable": true,
      "target_shape": [1, 1, 32]}})";
  auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
  EXPECT_EQ(layer->build({32}), (Shape{1, 1, 32}));
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("config", "").at("target_shape", "").dump(), "[1, 1, 32]");
  EXPECT_EQ(core::layer_spec_from_json(out).kind, LayerKind::Reshape);
}

TEST(ReshapeLayer, RefusesWhatDoesNotFit) {
  const auto status = [](const char* target, const Shape& in) {
    return test::status_of([&] { core::make_layer(reshape_to(target))->build(in); });
  };
  EXPECT_EQ(status("[5]", {6}), Status::InvalidArgument);
  EXPECT_EQ(status("[-1, 4]", {6}), Status::InvalidArgument);
  EXPECT_EQ(status("[-1, -1]", {6}), Status::InvalidArgument);
  EXPECT_EQ(status("[0, 6]", {6}), Status::InvalidArgument);
  EXPECT_EQ(status("[]", {6}), Status::InvalidArgument);
  EXPECT_EQ(status("[4294967296, 4294967296, -1]", {6}), Status::InvalidArgument);  // the product overflows
  EXPECT_EQ(status("[-1, 3]", {6}), Status::Ok);
}

}  // namespace
}  // namespace kx
