// Padding absorption (Network::absorb_paddings): a depthwise convolution adds the zeros of the
// ZeroPadding2D layer that alone feeds it, which then moves nothing. Training with it must give what the
// layers give apart (the no_layer_fusion hook), value for value, in a smaller arena.
#include <gtest/gtest.h>

#include "layer_fusion_check.hpp"

namespace kx {
namespace {

using test::expect_equal_values;
using test::Trained;

// MobileNet's downsampling (a pad at the bottom and right, then a strided "valid" depthwise convolution,
// after a fused normalisation and ReLU6), unequal padding on every side before a "same" convolution with
// two filters per channel, and what stays apart: a padding read twice, a padding before a Conv2D.
Model padded_blocks(const Strategy& s) {
  Model m = Model::functional(s, {9, 9, 3}, "x");
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c1", "filters": 6, "kernel_size": 1}})", {"x"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn1"}})", {"c1"});
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "relu6", "max_value": 6.0}})", {"bn1"});
  m.add_layer(R"({"class_name": "ZeroPadding2D", "config": {"name": "pad1", "padding": [[0, 1], [0, 1]]}})",
              {"relu6"});
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw1", "kernel_size": 3, "strides": 2,
              "padding": "valid"}})", {"pad1"});
  m.add_layer(R"({"class_name": "ZeroPadding2D", "config": {"name": "pad2", "padding": [[2, 1], [1, 3]]}})",
              {"dw1"});
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw2", "kernel_size": 3, "padding": "same",
              "depth_multiplier": 2, "use_bias": false}})", {"pad2"});
  m.add_layer(R"({"class_name": "ZeroPadding2D", "config": {"name": "pad3", "padding": 1}})", {"dw2"});
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw3", "kernel_size": 3}})", {"pad3"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c2", "filters": 12, "kernel_size": 3}})", {"pad3"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "sum"}})", {"dw3", "c2"});  // pad3 read twice
  m.add_layer(R"({"class_name": "ZeroPadding2D", "config": {"name": "pad4", "padding": [1, 2]}})", {"sum"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c3", "filters": 5, "kernel_size": 3}})", {"pad4"});
  m.add_layer(R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "pool"}})", {"c3"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "d", "units": 4, "activation": "softmax"}})", {"pool"});
  return m;
}

// Two epochs of Adam on 16 samples of 4 classes.
Trained train(bool fusion, bool two_replicas = false) {
  return test::train_fused_or_apart(padded_blocks, fusion, {9, 9, 3}, 16, 4, {}, two_replicas);
}

TEST(PaddingAbsorption, TrainsAsTheLayersApartInLessMemory) {
  const Trained apart = train(false), fused = train(true);
  expect_equal_values(fused.weights, apart.weights, "weights");
  expect_equal_values(fused.predictions, apart.predictions, "predictions");
  EXPECT_EQ(fused.loss, apart.loss);
  EXPECT_LT(fused.arena, apart.arena);  // the padded copies and their gradients are gone
}

TEST(PaddingAbsorption, TwoReplicasTrainAsTheLayersApart) {
  const Trained apart = train(false, true), fused = train(true, true);
  expect_equal_values(fused.weights, apart.weights, "weights");
}

}  // namespace
}  // namespace kx
