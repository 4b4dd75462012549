// Keras 3's activations beyond relu/sigmoid/tanh/softmax (relu6, silu/swish, hard_silu/hard_swish,
// hard_sigmoid, gelu in both forms, elu, leaky_relu, softplus): the shared formulas against float64,
// the Activation layer and Dense, Conv2D and DepthwiseConv2D with each against a float64 reference
// and finite differences, the names Keras writes and reads, what the step arena keeps, and a model with
// them trained on two CPU replicas equal to one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/pointwise_activation_math.hpp"
#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

constexpr Activation kKerasActivations[] = {Activation::Relu6, Activation::Silu,     Activation::HardSilu,
                                            Activation::HardSigmoid, Activation::Gelu, Activation::GeluTanh,
                                            Activation::Elu,   Activation::LeakyRelu, Activation::Softplus};
static_assert(std::size(kKerasActivations) == kActivationCount - 5, "every activation after softmax");

double reference(Activation act, double x) { return test::keras_activation(act, x); }

Vec apply(Activation act, Vec v) {
  for (double& e : v) e = reference(act, e);
  return v;
}

// Points across the kinks (0, +-3, 6) and softplus's switches (+-13.94), between them and beyond.
std::vector<float> grid() {
  std::vector<float> v;
  for (float x = -20.0f; x <= 20.0f; x += 0.0625f) v.push_back(x + 0.01f);
  for (float x : {-1e-3f, 1e-3f, -13.95f, 13.95f, -13.93f, 13.93f}) v.push_back(x);
  return v;
}

TEST(KerasActivations, SharedFormulasMatchFloat64) {
  for (Activation act : kKerasActivations) {
    SCOPED_TRACE(activation_name(act));
    for (float x : grid()) {
      const double want = reference(act, x);
      EXPECT_NEAR(backend::pointwise_activation(act, x), want, 2e-6 * std::max(1.0, std::fabs(want))) << "x " << x;
      // The derivative from central differences away from the kinks.
      const double h = 1e-5;
      const bool near_kink = std::fabs(x) < 2 * h || std::fabs(std::fabs(x) - 3) < 2 * h || std::fabs(x - 6) < 2 * h;
      if (near_kink) continue;
      const double slope = (reference(act, x + h) - reference(act, x - h)) / (2 * h);
      EXPECT_NEAR(backend::pointwise_activation_backward(act, x, 0.75f), 0.75 * slope, 1e-5 * std::max(1.0, std::fabs(slope)))
          << "x " << x;
    }
  }
}

TEST(KerasActivations, KerasNamesAndAliases) {
  EXPECT_EQ(activation_from_name("swish"), Activation::Silu);
  EXPECT_EQ(activation_from_name("silu"), Activation::Silu);
  EXPECT_EQ(activation_from_name("hard_swish"), Activation::HardSilu);
  EXPECT_EQ(activation_from_name("hard_silu"), Activation::HardSilu);
  for (Activation act : kKerasActivations) {
    if (act != Activation::GeluTanh) {
      EXPECT_EQ(activation_from_name(activation_name(act)), act);
    }
  }
  // The tanh form has no Keras name: only the gelu op's approximate=True makes it.
  EXPECT_EQ(test::status_of([] { activation_from_name("gelu_approximate"); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { activation_from_name("mish"); }), Status::InvalidArgument);
}

TEST(KerasActivations, ActivationLayerMatchesTheReferenceAndFiniteDifferences) {
  for (Activation act : kKerasActivations) {
    SCOPED_TRACE(activation_name(act));
    LayerSpec spec = test::spec_of(LayerKind::Activation, "activation");
    spec.activation = act;
    auto layer = core::make_layer(spec);
    EXPECT_TRUE(layer->backward_reads_input());  // the gradient comes from x
    EXPECT_FALSE(layer->backward_reads_output());
    test::check_layer(*layer, {{2, 5}}, 3, {}, [&](const std::vector<Vec>& x, const Vec&) { return apply(act, x[0]); });
  }
}

// Dense with kernel values up to 3: the pre-activations spread over [-8, 8], across the kinks.
TEST(KerasActivations, DenseMatchesTheReferenceAndFiniteDifferences) {
  const int64_t in = 5, units = 4, rows = 6;
  const std::vector<float> w = test::random_floats(static_cast<size_t>(in * units + units), 11, -3.0f, 3.0f);
  for (Activation act : kKerasActivations) {
    SCOPED_TRACE(activation_name(act));
    LayerSpec spec = test::spec_of(LayerKind::Dense, "dense");
    spec.units = units;
    spec.activation = act;
    auto layer = core::make_layer(spec);
    layer->build({in});
    EXPECT_EQ(layer->scratch_floats(rows), rows * units);  // the kept pre-activations
    EXPECT_FALSE(layer->backward_reads_output());
    test::check_layer(*layer, {{in}}, rows, w, [&](const std::vector<Vec>& x, const Vec& wd) {
      Vec y(static_cast<size_t>(rows * units));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t u = 0; u < units; ++u) {
          double z = wd[static_cast<size_t>(in * units + u)];
          for (int64_t i = 0; i < in; ++i)
            z += x[0][static_cast<size_t>(r * in + i)] * wd[static_cast<size_t>(i * units + u)];
          y[static_cast<size_t>(r * units + u)] = reference(act, z);
        }
      return y;
    });
  }
}

// A 1x1 Conv2D and a 2x2 DepthwiseConv2D, each with swish and hard_swish.
TEST(KerasActivations, ConvolutionsMatchTheReferenceAndFiniteDifferences) {
  const int64_t rows = 2, h = 3, wd_ = 3, c = 2;
  for (Activation act : {Activation::Silu, Activation::HardSilu, Activation::Gelu}) {
    SCOPED_TRACE(activation_name(act));
    LayerSpec conv = test::spec_of(LayerKind::Conv2D, "conv2d");
    conv.filters = 3;
    conv.kernel_h = conv.kernel_w = 1;
    conv.activation = act;
    auto conv_layer = core::make_layer(conv);
    const std::vector<float> cw = test::random_floats(static_cast<size_t>(c * 3 + 3), 12, -3.0f, 3.0f);
    test::check_layer(*conv_layer, {{h, wd_, c}}, rows, cw, [&](const std::vector<Vec>& x, const Vec& w) {
      Vec y(static_cast<size_t>(rows * h * wd_ * 3));
      for (int64_t p = 0; p < rows * h * wd_; ++p)
        for (int64_t f = 0; f < 3; ++f) {
          double z = w[static_cast<size_t>(c * 3 + f)];
          for (int64_t k = 0; k < c; ++k) z += x[0][static_cast<size_t>(p * c + k)] * w[static_cast<size_t>(k * 3 + f)];
          y[static_cast<size_t>(p * 3 + f)] = reference(act, z);
        }
      return y;
    });

    LayerSpec dw = test::spec_of(LayerKind::DepthwiseConv2D, "depthwise_conv2d");
    dw.config = std::string(R"({"kernel_size": [2, 2], "activation": ")") + activation_name(act) + "\"}";
    auto dw_layer = core::make_layer(dw);
    const std::vector<float> dww = test::random_floats(static_cast<size_t>(4 * c + c), 13, -3.0f, 3.0f);
    test::check_layer(*dw_layer, {{h, wd_, c}}, rows, dww, [&](const std::vector<Vec>& x, const Vec& w) {
      const int64_t oh = h - 1, ow = wd_ - 1;
      Vec y(static_cast<size_t>(rows * oh * ow * c));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j)
            for (int64_t k = 0; k < c; ++k) {
              double z = w[static_cast<size_t>(4 * c + k)];
              for (int64_t a = 0; a < 2; ++a)
                for (int64_t b = 0; b < 2; ++b)
                  z += x[0][static_cast<size_t>(((r * h + i + a) * wd_ + j + b) * c + k)] *
                       w[static_cast<size_t>((a * 2 + b) * c + k)];
              y[static_cast<size_t>(((r * oh + i) * ow + j) * c + k)] = reference(act, z);
            }
      return y;
    });
  }
}

TEST(KerasActivations, InPlaceForwardMatchesAndBackwardFromOutputIsRefused) {
  auto be = backend::make_cpu_backend(1);
  std::vector<float> x = grid(), y(x.size()), in_place = x;
  be->pointwise_activation_forward(Activation::Gelu, static_cast<int64_t>(x.size()), x.data(), y.data());
  be->activation_forward(Activation::Gelu, 1, static_cast<int64_t>(x.size()), in_place.data());
  EXPECT_EQ(in_place, y);
  std::vector<float> dz(x.size());
  EXPECT_EQ(test::status_of([&] {
              be->activation_backward(Activation::Silu, 1, static_cast<int64_t>(x.size()), y.data(), x.data(), dz.data());
            }),
            Status::Internal);
  EXPECT_EQ(test::status_of([&] {
              be->pointwise_activation_forward(Activation::Softmax, static_cast<int64_t>(x.size()), x.data(), y.data());
            }),
            Status::Internal);
}

TEST(KerasActivations, KerasConfigsReadAndWriteTheirNames) {
  const LayerSpec spec = core::layer_spec_from_json(
      json::parse(R"({"class_name": "Dense", "config": {"name": "d", "units": 3, "activation": "swish"}})"));
  EXPECT_EQ(spec.activation, Activation::Silu);
  auto layer = core::make_layer(spec);
  layer->build({4});
  EXPECT_EQ(layer->to_json().at("config", "").at("activation", "").as_string(""), "silu");  // as Keras writes it
  const LayerSpec act = core::layer_spec_from_json(
      json::parse(R"({"class_name": "Activation", "config": {"name": "a", "activation": "hard_swish"}})"));
  EXPECT_EQ(act.activation, Activation::HardSilu);
  EXPECT_EQ(test::status_of([] {
              core::layer_spec_from_json(
                  json::parse(R"({"class_name": "Activation", "config": {"name": "a", "activation": "mish"}})"));
            }),
            Status::InvalidArgument);
}

// Each activation, the operations and the broadcast Multiply written as ONNX nodes (their numbers are
// checked in OpenCV by the bindings' tests where it is installed).
TEST(KerasActivations, ExportToOnnx) {
  Model m = Model::functional(Strategy::default_strategy(), {4, 4, 3}, "image");
  std::string last = "image";
  for (Activation act : kKerasActivations) {
    if (act == Activation::GeluTanh) continue;  // no Keras name: the gelu operation below
    LayerSpec spec = test::spec_of(LayerKind::Activation, "");
    spec.name = std::string("act_") + activation_name(act);
    spec.activation = act;
    m.add(spec, {last});
    last = spec.name;
  }
  m.add_layer(R"({"class_name": "TensorOperation", "config": {"name": "gelu_tanh", "operation": "Gelu",
              "approximate": true}})",
              {last});
  m.add_layer(R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "squeeze", "keepdims": true}})", {"gelu_tanh"});
  m.add_layer(R"({"class_name": "Multiply", "config": {"name": "excite"}})", {"gelu_tanh", "squeeze"});
  m.add_layer(R"({"class_name": "TensorOperation", "config": {"name": "shifted", "operation": "Subtract",
              "arguments": [1.0, null]}})",
              {"excite"});
  m.compile({});
  const auto path = std::filesystem::temp_directory_path() / "kx_keras_activations.onnx";
  m.export_onnx(path.string());
  EXPECT_GT(std::filesystem::file_size(path), 0u);
  std::filesystem::remove(path);
}

const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "Dense", "config": {"units": 8, "activation": "swish"}})",
    R"({"class_name": "Activation", "config": {"activation": "gelu"}})",
    R"({"class_name": "Dense", "config": {"units": 6, "activation": "hard_swish"}})",
    R"({"class_name": "Dense", "config": {"units": 5, "activation": "elu"}})",
    R"({"class_name": "Dense", "config": {"units": 5, "activation": "softplus"}})",
    R"({"class_name": "Activation", "config": {"activation": "leaky_relu"}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

TEST(KerasActivations, TwoReplicasTrainAsOne) {
  const std::vector<float> one = test::weights_after_training({6}, kTrainedLayers, 1);
  const std::vector<float> two = test::weights_after_training({6}, kTrainedLayers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
