// The mobile models on cuda:0 against the CPU: each of their building blocks alone (depthwise
// convolutions reading an absorbed ZeroPadding2D, batch normalisation with the activation after it
// fused, squeeze-and-excite products, residual sums), then the applications whole. One SGD step from
// the same weights: the inference forward before it, the training loss and every weight tensor after
// it (SGD moves a weight by the learning rate times its gradient, so a tensor apart names the layer
// whose gradient differs).
//
// How far apart is too far: deep stacks of batch normalisations over few values (a 32x32 MobileNet
// ends with 1x1 feature maps: 8 values per channel) amplify rounding, so the CPU also takes the step
// from inputs moved by one ulp each, and each weight tensor of the GPU may be no further from the
// CPU's than a few times that nudge moved it, plus a small fraction of the largest update in the
// model (sums that cancel, such as the gradient of a bias that a batch normalisation follows, are
// summed in float on the CPU and in double on the GPU). A ReLU6 or hard sigmoid input that rounding
// puts on the other side of its kink flips one gradient term outright: a few tensors of a whole
// application may differ by that much. A wrong kernel moves most tensors, by far more. Without a GPU
// the tests skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "config/test_hooks.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"
#include "require_gpu.hpp"

namespace kx {
namespace {

constexpr int64_t kBatch = 8, kClasses = 4;

struct Step {
  std::vector<float> before;         // the weights before the step
  std::vector<float> predicted;      // before the step (inference)
  double loss = 0;                   // of the step (training mode)
  std::vector<float> weights;        // after it
  std::vector<WeightInfo> tensors;
};

using Build = std::function<Model(const Strategy&)>;

// One step on `device`; with nudged, every input value one ulp up.
Step one_step(const std::string& device, const Build& build, const Shape& sample, bool nudged = false) {
  Strategy s = Strategy::mirrored({device});
  s.set_tf32(false);
  Model m = build(s);
  CompileOptions co;
  co.seed = 3;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = 0.1;
  m.compile(co);
  std::vector<float> x = test::random_floats(static_cast<size_t>(kBatch * num_elements(sample)), 21);
  if (nudged)
    for (float& v : x) v = std::nextafter(v, INFINITY);
  std::vector<float> y(static_cast<size_t>(kBatch));  // sparse labels (the default loss)
  for (int64_t i = 0; i < kBatch; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % kClasses);
  Step r;
  r.before = m.get_weights();
  r.predicted = m.predict(x.data(), kBatch);
  r.loss = m.train_on_batch(x.data(), y.data(), kBatch).loss;
  r.weights = m.get_weights();
  r.tensors = m.weights();
  return r;
}

// The allowance of a tensor: kNoiseFactor times the nudge's distance plus kUpdateShare of the largest
// update; at most kKinkShare of a model's tensors may exceed it (a flipped term in a late layer reaches
// every gradient before it: MobileNetV3's first convolutions), and none may exceed kKinkUpdateShare of
// the largest update. Inputs moved by 1e-3 in one value of 50 leave 7 to 50 % of each application's
// tensors over the allowance.
constexpr double kNoiseFactor = 10, kUpdateShare = 1e-4, kKinkShare = 0.05, kKinkUpdateShare = 1e-2;

// max |a - b| over [first, first + n) (NaN where either holds one).
double distance(const std::vector<float>& a, const std::vector<float>& b, size_t first, size_t n) {
  double d = 0;
  for (size_t i = first; i < first + n; ++i) {
    const double e = std::fabs(double(a[i]) - b[i]);
    if (std::isnan(e)) return NAN;
    d = std::max(d, e);
  }
  return d;
}

// Runs build on the CPU (from the inputs and from them nudged) and on cuda:0 and expects the GPU's
// step within each tensor's allowance.
void expect_same_step(const std::string& what, const Build& build, const Shape& sample) {
  SCOPED_TRACE(what);
  const Step cpu = one_step("cpu", build, sample), nudged = one_step("cpu", build, sample, true),
             gpu = one_step("cuda:0", build, sample);
  ASSERT_EQ(cpu.weights.size(), gpu.weights.size());
  ASSERT_EQ(cpu.before, gpu.before) << "the two devices start from different weights";
  const double update = distance(cpu.weights, cpu.before, 0, cpu.weights.size());
  ASSERT_GT(update, 0.0);
  int over = 0;
  double worst = 0;  // the largest ratio of a tensor's distance to its allowance
  std::string worst_name;
  for (const WeightInfo& w : cpu.tensors) {
    const size_t first = static_cast<size_t>(w.offset), n = static_cast<size_t>(num_elements(w.shape));
    const double gap = distance(gpu.weights, cpu.weights, first, n);
    const double noise = distance(nudged.weights, cpu.weights, first, n);
    const double ratio = gap / (kNoiseFactor * noise + kUpdateShare * update);
    if (!(ratio <= 1)) {
      ++over;
      std::printf("  %s: %s %.2e apart, %.2f of the allowance (a nudge: %.2e; largest update %.2e)\n", what.c_str(),
                  w.name.c_str(), gap, ratio, noise, update);
    }
    if (!(ratio <= worst)) {
      worst = ratio;
      worst_name = w.name;
    }
    EXPECT_LE(gap, kKinkUpdateShare * update) << w.name;
  }
  double predicted_scale = 1e-3;
  for (float v : cpu.predicted) predicted_scale = std::max(predicted_scale, std::fabs(double(v)));
  ASSERT_EQ(gpu.predicted.size(), cpu.predicted.size());
  const double predicted = distance(gpu.predicted, cpu.predicted, 0, cpu.predicted.size()) / predicted_scale;
  const double loss_noise = std::fabs(nudged.loss - cpu.loss);
  std::printf("%s: predictions %.2e apart; loss cpu %.7f, nudged %.7f, cuda:0 %.7f; weights at most %.2f of "
              "the allowance (%s), %d of %zu tensors over it\n",
              what.c_str(), predicted, cpu.loss, nudged.loss, gpu.loss, worst, worst_name.c_str(), over,
              cpu.tensors.size());
  EXPECT_LE(over, static_cast<int>(kKinkShare * static_cast<double>(cpu.tensors.size())));
  EXPECT_LE(predicted, 1e-4);
  EXPECT_LE(std::fabs(gpu.loss - cpu.loss), kNoiseFactor * loss_noise + 3e-5 * std::max(1.0, cpu.loss));
}

// A functional model on 8x8x8 samples: `body` adds layers after the input, then global average
// pooling and a softmax Dense of kClasses.
Build blocks(const std::vector<std::pair<std::string, std::vector<std::string>>>& body) {
  return [body](const Strategy& s) {
    Model m = Model::functional(s, {8, 8, 8}, "input");
    for (const auto& [json, inbound] : body) m.add_layer(json, inbound);
    m.add_layer(R"({"class_name": "GlobalAveragePooling2D", "config": {}})");
    m.add_layer(R"({"class_name": "Dense", "config": {"units": 4, "activation": "softmax"}})");
    return m;
  };
}

std::string bn(const std::string& name) {
  return R"({"class_name": "BatchNormalization", "config": {"name": ")" + name + R"(", "momentum": 0.9}})";
}
std::string conv1x1(const std::string& name, int filters, const std::string& activation = "linear") {
  return R"({"class_name": "Conv2D", "config": {"name": ")" + name + R"(", "filters": )" + std::to_string(filters) +
         R"(, "kernel_size": 1, "activation": ")" + activation + R"("}})";
}
std::string act(const std::string& name, const std::string& activation) {
  return R"({"class_name": "Activation", "config": {"name": ")" + name + R"(", "activation": ")" + activation +
         R"("}})";
}

class CudaMobile : public ::testing::TestWithParam<bool> {
 protected:
  // The parameter: whether layers fuse (the float32 default) or each runs alone.
  void SetUp() override { config::test_hooks().no_layer_fusion = !GetParam(); }
  void TearDown() override { config::test_hooks().no_layer_fusion = false; }
};

TEST_P(CudaMobile, BlocksStepLikeTheCpu) {
  REQUIRE_GPU();
  const Shape sample{8, 8, 8};
  expect_same_step("depthwise same", blocks({{R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw",
      "kernel_size": 3, "padding": "same"}})", {}}}), sample);
  expect_same_step("padded stride-2 depthwise", blocks({
      {R"({"class_name": "ZeroPadding2D", "config": {"name": "pad", "padding": [[0, 1], [0, 1]]}})", {}},
      {R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 3, "strides": 2,
          "padding": "valid", "use_bias": false}})", {}}}), sample);
  expect_same_step("conv bn", blocks({{conv1x1("conv", 8), {}}, {bn("bn"), {}}}), sample);
  expect_same_step("conv bn relu6", blocks({{conv1x1("conv", 8), {}}, {bn("bn"), {}},
      {R"({"class_name": "ReLU", "config": {"name": "relu", "max_value": 6.0}})", {}}}), sample);
  for (const char* a : {"relu", "swish", "hard_swish", "gelu"})
    expect_same_step(std::string("conv bn ") + a, blocks({{conv1x1("conv", 8), {}}, {bn("bn"), {}}, {act("a", a), {}}}),
                     sample);
  expect_same_step("squeeze and excite", blocks({
      {conv1x1("conv", 8), {}},
      {R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "squeeze", "keepdims": true}})", {}},
      {conv1x1("reduce", 2, "relu"), {}},
      {conv1x1("expand", 8, "hard_sigmoid"), {}},
      {R"({"class_name": "Multiply", "config": {"name": "excite"}})", {"conv", "expand"}}}), sample);
  expect_same_step("residual", blocks({
      {conv1x1("expand", 16), {}}, {bn("expand_bn"), {}}, {act("expand_relu", "relu6"), {}},
      {R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 3, "padding": "same"}})", {}},
      {bn("dw_bn"), {}}, {act("dw_relu", "relu6"), {}},
      {conv1x1("project", 8), {}}, {bn("project_bn"), {}},
      {R"({"class_name": "Add", "config": {"name": "add"}})", {"input", "project_bn"}}}), sample);
}

TEST_P(CudaMobile, ApplicationsStepLikeTheCpu) {
  REQUIRE_GPU();
  for (const std::string name : {"MobileNetV2", "MobileNetV3Small", "MobileNetV3Large", "EfficientNetB0"})
    expect_same_step(name, [&](const Strategy& s) {
      return applications::application(s, name, R"({"input_shape": [32, 32, 3], "classes": 4})");
    }, {32, 32, 3});
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaMobile, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Fused" : "LayerByLayer"; });

}  // namespace
}  // namespace kx
