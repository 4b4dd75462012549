// Moment sharing (Network::share_moments): a convolution whose output a BatchNormalization alone reads
// sums that output's column moments chunk by chunk as it writes it, and the normalisation does not read
// it again for them. The backend's fused calls must give what the two calls give, bit for bit, and
// training must give what the layers give apart (the no_layer_fusion hook), value for value.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "layer_fusion_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Epilogue;
using backend::Trans;
using test::expect_equal_values;
using test::Trained;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct GemmCase {
  int64_t M, N, K;
  bool bias, relu;
};

// Many chunks over both threads; one row; a channel count that is no multiple of 16 (the columns
// summed row by row); a K long enough to be cut into passes; a K the GEMM slices (few tiles), which
// the backend runs the plain way; an empty product.
TEST(MomentSharing, TheGemmWithMomentsGivesTheGemmAndTheMomentsBitForBit) {
  const auto be = backend::make_cpu_backend(2);
  for (const GemmCase g : {GemmCase{4609, 40, 24, false, false}, GemmCase{1, 5, 7, true, false},
                           GemmCase{3001, 24, 60, true, true}, GemmCase{700, 48, 1500, false, false},
                           GemmCase{7, 3, 9000, false, false}, GemmCase{0, 8, 4, false, false}}) {
    const std::string what = std::to_string(g.M) + "x" + std::to_string(g.N) + "x" + std::to_string(g.K);
    const std::vector<float> a = test::random_floats(static_cast<size_t>(g.M * g.K), 3, -1.0f, 2.0f);
    const std::vector<float> b = test::random_floats(static_cast<size_t>(g.K * g.N), 4);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(g.N), 5);
    Epilogue ep;
    ep.bias = g.bias ? bias.data() : nullptr;
    ep.activation = g.relu ? Activation::Relu : Activation::None;
    std::vector<float> c1(static_cast<size_t>(g.M * g.N), -7.0f), c2 = c1;
    std::vector<float> mean1(static_cast<size_t>(g.N)), var1 = mean1, mean2(mean1.size(), 9.0f), var2 = mean2;
    be->gemm(Trans::No, Trans::No, g.M, g.N, g.K, a.data(), g.K, b.data(), g.N, 0.0f, c1.data(), g.N, ep);
    be->column_moments(g.M, g.N, c1.data(), mean1.data(), var1.data());
    be->gemm_column_moments(g.M, g.N, g.K, a.data(), g.K, b.data(), g.N, c2.data(), g.N, ep, mean2.data(), var2.data());
    EXPECT_TRUE(same_bits(c1, c2)) << what;
    EXPECT_TRUE(same_bits(mean1, mean2)) << what;
    EXPECT_TRUE(same_bits(var1, var2)) << what;
    if (g.M > 100) {
      EXPECT_GT(var2[0], 0.0f) << what;  // a real spread, not a zero both calls agree on
    }
  }
}

TEST(MomentSharing, TheDepthwiseConvolutionWithMomentsGivesBothBitForBit) {
  const auto be = backend::make_cpu_backend(2);
  struct Case {
    int64_t rows, size, channels, kernel, stride, multiplier;
  };
  for (const Case k : {Case{6, 24, 40, 3, 1, 1}, Case{5, 17, 12, 5, 2, 2}, Case{1, 1, 3, 1, 1, 1}}) {
    backend::Window2d g;
    g.in_h = g.in_w = k.size;
    g.channels = k.channels;
    g.k_h = g.k_w = k.kernel;
    g.stride_h = g.stride_w = k.stride;
    g.pad_top = g.pad_left = (k.kernel - 1) / 2;
    g.out_h = g.out_w = (k.size + 2 * g.pad_top - k.kernel) / k.stride + 1;
    const int64_t outputs = k.channels * k.multiplier, positions = k.rows * g.out_h * g.out_w;
    const std::vector<float> x = test::random_floats(static_cast<size_t>(k.rows * k.size * k.size * k.channels), 6);
    const std::vector<float> w = test::random_floats(static_cast<size_t>(k.kernel * k.kernel * outputs), 7);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(outputs), 8);
    std::vector<float> y1(static_cast<size_t>(positions * outputs)), y2(y1.size(), 5.0f);
    std::vector<float> mean1(static_cast<size_t>(outputs)), var1 = mean1, mean2 = mean1, var2 = mean1;
    be->depthwise_conv2d_forward(g, k.multiplier, k.rows, x.data(), w.data(), bias.data(), y1.data());
    be->column_moments(positions, outputs, y1.data(), mean1.data(), var1.data());
    be->depthwise_conv2d_forward_moments(g, k.multiplier, k.rows, x.data(), w.data(), bias.data(), y2.data(),
                                         mean2.data(), var2.data());
    const std::string what = std::to_string(k.size) + "x" + std::to_string(k.channels);
    EXPECT_TRUE(same_bits(y1, y2)) << what;
    EXPECT_TRUE(same_bits(mean1, mean2)) << what;
    EXPECT_TRUE(same_bits(var1, var2)) << what;
  }
}

// Normalisations after a pointwise convolution (many chunks of rows), a depthwise one, a 3x3
// convolution with a ReLU of its own, and what stays apart: a convolution whose output is read twice,
// a normalisation after a Dense layer, a frozen normalisation.
Model normalised_blocks(const Strategy& s) {
  Model m = Model::functional(s, {24, 24, 8}, "x");
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c1", "filters": 40, "kernel_size": 1}})", {"x"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn1"}})", {"c1"});
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "relu6", "max_value": 6.0}})", {"bn1"});
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 3, "padding": "same"}})",
              {"relu6"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn2"}})", {"dw"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c2", "filters": 20, "kernel_size": 3, "strides": 2,
              "activation": "relu"}})", {"bn2"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn3"}})", {"c2"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c3", "filters": 20, "kernel_size": 1}})", {"bn3"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn4"}})", {"c3"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "sum"}})", {"bn4", "c3"});  // c3 read twice
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c4", "filters": 12, "kernel_size": 1}})", {"sum"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "frozen"}})", {"c4"});
  m.add_layer(R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "pool"}})", {"frozen"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "d1", "units": 16}})", {"pool"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn5"}})", {"d1"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "d", "units": 4, "activation": "softmax"}})", {"bn5"});
  return m;
}

Trained train(bool fusion, bool two_replicas = false) {
  return test::train_fused_or_apart(normalised_blocks, fusion, {24, 24, 8}, 32, 4, {"frozen"}, two_replicas);
}

TEST(MomentSharing, TrainsAsTheLayersApart) {
  const Trained apart = train(false), fused = train(true);
  expect_equal_values(fused.weights, apart.weights, "weights");
  expect_equal_values(fused.predictions, apart.predictions, "predictions");
  EXPECT_EQ(fused.loss, apart.loss);
}

TEST(MomentSharing, TwoReplicasTrainAsTheLayersApart) {
  const Trained apart = train(false, true), fused = train(true, true);
  expect_equal_values(fused.weights, apart.weights, "weights");
}

}  // namespace
}  // namespace kx
