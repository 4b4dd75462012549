// Padding absorption (Network::absorb_paddings): a depthwise convolution adds the zeros of the
// ZeroPadding2D layer that alone feeds it, which then moves nothing. Training with it must give what the
// layers give apart (the no_layer_fusion hook), value for value, in a smaller arena.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/test_hooks.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

class FusionOff {
 public:
  explicit FusionOff(bool off) { config::test_hooks().no_layer_fusion = off; }
  ~FusionOff() { config::test_hooks().no_layer_fusion = false; }
  FusionOff(const FusionOff&) = delete;
  FusionOff& operator=(const FusionOff&) = delete;
};

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

struct Trained {
  std::vector<float> weights, predictions;
  double loss = 0;
  int64_t arena = 0;
};

Trained train(bool fusion, bool two_replicas = false) {
  const FusionOff hook(!fusion);
  Strategy s = two_replicas ? Strategy::mirrored({"cpu", "cpu"}) : Strategy::default_strategy();
  Model m = padded_blocks(s);
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Adam;
  co.optimizer.learning_rate = 0.01;
  m.compile(co);
  const int64_t n = 16;
  std::vector<float> x = test::random_floats(n * 9 * 9 * 3, 13, -2.0f, 2.0f), y(n);
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 4);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 9, 9, 3}, y.data(), DType::F32, {n});
  d.batch(8, false);
  FitOptions fo;
  fo.epochs = 2;
  History h;
  EXPECT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
  Trained t;
  t.weights = m.get_weights();
  t.predictions = m.predict(x.data(), n);
  t.loss = h.get("loss", 1);
  t.arena = m.training_memory(8).step_arena;
  return t;
}

void expect_equal_values(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << what << " [" << i << "]";
    ASSERT_EQ(a[i], b[i]) << what << " [" << i << "]";
  }
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
