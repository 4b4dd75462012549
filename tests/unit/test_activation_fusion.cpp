// Activation fusion (Network::fuse_activations): a batch normalisation applies the activation layer
// that alone reads its output, in one pass each way. Training with it must give what the layers give
// apart (the no_layer_fusion hook), value for value, in a smaller arena.
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

struct Trained {
  std::vector<float> weights, predictions;
  double loss = 0;
  int64_t arena = 0;
};

// Two epochs of Adam on 24 samples of 6 classes; `frozen` layers train in inference mode.
Trained train(bool fusion, const std::vector<std::string>& frozen = {}, bool two_replicas = false) {
  const FusionOff hook(!fusion);
  Strategy s = two_replicas ? Strategy::mirrored({"cpu", "cpu"}) : Strategy::default_strategy();
  Model m = mobile_blocks(s);
  for (const std::string& layer : frozen) m.set_trainable(layer, false);
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Adam;
  co.optimizer.learning_rate = 0.01;
  m.compile(co);
  const int64_t n = 24;
  std::vector<float> x = test::random_floats(n * 8 * 8 * 3, 11, -2.0f, 2.0f), y(n);
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 6);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 8, 8, 3}, y.data(), DType::F32, {n});
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

// Equal values (a fused ReLU may give 0 where the layer gave -0: equal, not the same bits).
void expect_equal_values(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << what << " [" << i << "]";
    ASSERT_EQ(a[i], b[i]) << what << " [" << i << "]";
  }
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
