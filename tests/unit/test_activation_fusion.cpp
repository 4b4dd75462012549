// Activation fusion (Network::fuse_activations): a batch normalisation applies the activation layer
// that alone reads its output, in one pass each way. Training with it must give what the layers give
// apart (the no_layer_fusion hook), value for value, in a smaller arena.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layer_fusion_check.hpp"

namespace kx {
namespace {

using test::expect_equal_values;
using test::FusionOff;
using test::Trained;

// Every activation a mobile model puts after a batch normalisation (ReLU, ReLU6 as a layer and as an
// activation, swish, hard swish), and what stays apart: a normalisation read twice, a ReLU with a slope,
// an activation after a layer that is no normalisation, and the model's output layer.
Model mobile_blocks(const Strategy& s) {
  Model m = Model::functional(s, {8, 8, 3}, "x");
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c1", "filters": 8, "kernel_size": 3, "padding": "same",
              "use_bias": false}})", {"x"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn1"}})", {"c1"});
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "relu6", "max_value": 6.0}})", {"bn1"});
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 3, "padding": "same"}})",
              {"relu6"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn2"}})", {"dw"});
  m.add_layer(R"({"class_name": "Activation", "config": {"name": "swish", "activation": "swish"}})", {"bn2"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c2", "filters": 8, "kernel_size": 1}})", {"swish"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn3"}})", {"c2"});
  m.add_layer(R"({"class_name": "Activation", "config": {"name": "hswish", "activation": "hard_swish"}})", {"bn3"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn4"}})", {"hswish"});
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "relu"}})", {"bn4"});
  m.add_layer(R"({"class_name": "Activation", "config": {"name": "relu6_act", "activation": "relu6"}})", {"relu"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "sum"}})", {"relu6_act", "bn4"});  // bn4 read twice
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn5"}})", {"sum"});
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "leaky", "negative_slope": 0.1}})", {"bn5"});
  m.add_layer(R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "pool"}})", {"leaky"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "d", "units": 6}})", {"pool"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn6"}})", {"d"});
  m.add_layer(R"({"class_name": "Activation", "config": {"name": "out", "activation": "softmax"}})", {"bn6"});
  return m;
}

// Two epochs of Adam on 24 samples of 6 classes; `frozen` layers train in inference mode.
Trained train(bool fusion, const std::vector<std::string>& frozen = {}, bool two_replicas = false) {
  return test::train_fused_or_apart(mobile_blocks, fusion, {8, 8, 3}, 24, 6, frozen, two_replicas);
}

TEST(ActivationFusion, TrainsAsTheLayersApartInLessMemory) {
  const Trained apart = train(false), fused = train(true);
  expect_equal_values(fused.weights, apart.weights, "weights");
  expect_equal_values(fused.predictions, apart.predictions, "predictions");
  EXPECT_EQ(fused.loss, apart.loss);
  EXPECT_LT(fused.arena, apart.arena);  // the normalisations' outputs before the activations are gone
}

// Frozen normalisations use their moving statistics, and their backward goes through the activation
// with forward's values formed again.
TEST(ActivationFusion, FrozenNormalisationsTrainAsTheLayersApart) {
  const std::vector<std::string> frozen = {"bn1", "bn2", "bn3"};
  const Trained apart = train(false, frozen), fused = train(true, frozen);
  expect_equal_values(fused.weights, apart.weights, "weights");
  expect_equal_values(fused.predictions, apart.predictions, "predictions");
  // Frozen is not untrained: the layers before them still learned.
  const Trained all = train(true);
  EXPECT_NE(fused.weights, all.weights);
}

TEST(ActivationFusion, TwoReplicasTrainAsTheLayersApart) {
  const Trained apart = train(false, {}, true), fused = train(true, {}, true);
  expect_equal_values(fused.weights, apart.weights, "weights");
}

// Mixed precision rounds the normalisation's output before the activation reads it: nothing is fused.
TEST(ActivationFusion, MixedPrecisionKeepsTheLayersApart) {
  auto arena = [](bool fusion) {
    const FusionOff hook(!fusion);
    Model m = mobile_blocks(Strategy::default_strategy());
    CompileOptions co;
    co.precision = Precision::MixedBfloat16;
    m.compile(co);
    return m.training_memory(8).step_arena;
  };
  EXPECT_EQ(arena(true), arena(false));
}

}  // namespace
}  // namespace kx
