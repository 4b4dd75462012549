// The Multiply merge layer and TensorOperation (Keras 3's operations on tensors in a functional model:
// x * y, x + 3.0, 1.0 - x, x / 6, keras.ops.gelu ...): forward against a float64 reference and
// backward against finite differences, with NumPy's broadcasting; Keras's operation nodes read into
// a model and written back; what they refuse; and a model with them trained on two replicas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/tensor_operation.hpp"
#include "io/json.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

// The flat index within a sample of shape `from` that position p of shape `to` reads (broadcasting).
size_t broadcast_index(const Shape& to, const Shape& from, int64_t p) {
  int64_t offset = 0, stride = 1;
  for (size_t k = to.size(); k-- > 0;) {
    const int64_t i = p % to[k];
    p /= to[k];
    if (from[k] != 1) offset += i * stride;
    stride *= from[k];
  }
  return static_cast<size_t>(offset);
}

double apply_op(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Subtract") return a - b;
  if (op == "Multiply") return a * b;
  return a / b;
}

// a op b for `rows` samples, a of shape sa, b of shape sb, broadcast to `out`.
Vec binary_reference(const std::string& op, const Vec& a, const Shape& sa, const Vec& b, const Shape& sb,
                     const Shape& out, int64_t rows) {
  const int64_t n = num_elements(out), na = num_elements(sa), nb = num_elements(sb);
  Vec y(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < n; ++p)
      y[static_cast<size_t>(r * n + p)] = apply_op(op, a[static_cast<size_t>(r * na) + broadcast_index(out, sa, p)],
                                                   b[static_cast<size_t>(r * nb) + broadcast_index(out, sb, p)]);
  return y;
}

LayerSpec operation(const std::string& config) {
  LayerSpec s = test::spec_of(LayerKind::TensorOperation, "op");
  s.config = config;
  return s;
}

TEST(MultiplyLayer, BroadcastsAsSqueezeAndExciteAndMatchesTheReference) {
  struct Case {
    Shape a, b, out;
  };
  for (const Case& c : {Case{{3, 4, 2}, {1, 1, 2}, {3, 4, 2}}, Case{{1, 1, 2}, {3, 4, 2}, {3, 4, 2}},
                        Case{{5}, {5}, {5}}, Case{{2, 1, 3}, {1, 4, 3}, {2, 4, 3}}}) {
    SCOPED_TRACE(to_string(c.a) + " * " + to_string(c.b));
    auto layer = core::make_layer(test::spec_of(LayerKind::Multiply, "multiply"));
    EXPECT_FALSE(layer->backward_reads_output());
    test::check_layer(*layer, {c.a, c.b}, 3, {}, [&](const std::vector<Vec>& x, const Vec&) {
      return binary_reference("Multiply", x[0], c.a, x[1], c.b, c.out, 3);
    });
  }
}

TEST(MultiplyLayer, RefusesWhatCannotBroadcast) {
  const auto status = [](const std::vector<Shape>& in) {
    return test::status_of([&] { core::make_layer(test::spec_of(LayerKind::Multiply, "m"))->build_inputs(in); });
  };
  EXPECT_EQ(status({{3, 4}, {3, 5}}), Status::InvalidArgument);
  EXPECT_EQ(status({{3, 4}, {4}}), Status::InvalidArgument);  // ranks differ
  EXPECT_EQ(status({{3}}), Status::InvalidArgument);
  EXPECT_EQ(status({{3}, {3}, {3}}), Status::Unsupported);
  EXPECT_EQ(status({{1, 1, 1, 1, 1, 1, 2}, {1, 1, 1, 1, 1, 1, 2}}), Status::Unsupported);  // rank past 6
}

TEST(TensorOperationLayer, BinaryOperationsOfTwoInputsBroadcast) {
  // Division: DivisionMatchesItsDerivatives (random divisors in [-1, 1] would come near 0).
  for (const char* op : {"Add", "Subtract", "Multiply"}) {
    SCOPED_TRACE(op);
    auto layer = core::make_layer(operation(std::string(R"({"operation": ")") + op + "\"}"));
    const Shape a{3, 2}, b{3, 1};
    test::check_layer(*layer, {a, b}, 2, {}, [&](const std::vector<Vec>& x, const Vec&) {
      return binary_reference(op, x[0], a, x[1], b, a, 2);
    });
  }
}

// a / b of (2, 2) by (1, 2), and 2 / x: the values and TensorFlow's gradients (dy / b; the sum over
// the broadcast axis of -dy a / b^2).
TEST(TensorOperationLayer, DivisionMatchesItsDerivatives) {
  auto be = backend::make_cpu_backend(1);
  const auto run = [&](core::Layer& layer, const std::vector<std::vector<float>>& x, const std::vector<float>& dy,
                       std::vector<float>& y, std::vector<std::vector<float>>& dx) {
    core::LayerContext c;
    c.be = be.get();
    c.rows = 1;
    std::vector<const float*> xs;
    std::vector<float*> dxs;
    dx.clear();
    for (const auto& v : x) {
      xs.push_back(v.data());
      dx.emplace_back(v.size());
    }
    for (auto& d : dx) dxs.push_back(d.data());
    y.assign(dy.size(), 0.0f);
    std::vector<float> g = dy;
    c.x = xs[0];
    c.xs = xs.data();
    c.y = y.data();
    c.dy = g.data();
    c.dx = dxs[0];
    c.dxs = dxs.data();
    layer.forward(c);
    layer.backward(c);
  };
  auto two = core::make_layer(operation(R"({"operation": "TrueDivide"})"));
  two->build_inputs({{2, 2}, {1, 2}});
  const std::vector<float> a{1.0f, -2.0f, 3.0f, 0.5f}, b{2.0f, -4.0f}, dy{0.5f, -1.0f, 2.0f, 0.25f};
  std::vector<float> y;
  std::vector<std::vector<float>> dx;
  run(*two, {a, b}, dy, y, dx);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(y[i], a[i] / b[i % 2]);
    EXPECT_FLOAT_EQ(dx[0][i], dy[i] / b[i % 2]);
  }
  for (size_t k = 0; k < 2; ++k)
    EXPECT_NEAR(dx[1][k], -(dy[k] * a[k] + dy[k + 2] * a[k + 2]) / (double(b[k]) * b[k]), 1e-6);

  auto reciprocal = core::make_layer(operation(R"({"operation": "TrueDivide", "arguments": [2.0, null]})"));
  reciprocal->build_inputs({{4}});
  const std::vector<float> x{1.5f, -2.0f, 3.0f, 4.5f};
  run(*reciprocal, {x}, dy, y, dx);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(y[i], 2.0f / x[i]);
    EXPECT_NEAR(dx[0][i], -dy[i] * 2.0 / (double(x[i]) * x[i]), 1e-6);
  }
}

TEST(TensorOperationLayer, ConstantsOnEitherSide) {
  struct Case {
    const char* config;
    double (*f)(double);
  };
  const Case cases[] = {
      {R"({"operation": "Multiply", "arguments": [null, 2.5]})", [](double x) { return x * 2.5; }},
      {R"({"operation": "Add", "arguments": [3.0, null]})", [](double x) { return 3 + x; }},
      {R"({"operation": "Subtract", "arguments": [1.0, null]})", [](double x) { return 1 - x; }},
      {R"({"operation": "Subtract", "arguments": [null, 0.5]})", [](double x) { return x - 0.5; }},
      {R"({"operation": "TrueDivide", "arguments": [null, 6]})", [](double x) { return x / 6; }},
      {R"({"operation": "Negative"})", [](double x) { return -x; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.config);
    auto layer = core::make_layer(operation(c.config));
    test::check_layer(*layer, {{2, 3}}, 2, {}, [&](const std::vector<Vec>& x, const Vec&) {
      Vec y = x[0];
      for (double& v : y) v = c.f(v);
      return y;
    });
  }
}

TEST(TensorOperationLayer, ActivationOperations) {
  struct Case {
    const char* config;
    double (*f)(double);
  };
  const Case cases[] = {
      {R"({"operation": "Gelu", "approximate": true})",
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x))); }},
      {R"({"operation": "Gelu", "approximate": false})", [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
      {R"({"operation": "Relu6"})", [](double x) { return std::min(std::max(x, 0.0), 6.0); }},
      {R"({"operation": "Sigmoid"})", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {R"({"operation": "Tanh"})", [](double x) { return std::tanh(x); }},
      {R"({"operation": "Silu"})", [](double x) { return x / (1 + std::exp(-x)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.config);
    auto layer = core::make_layer(operation(c.config));
    test::check_layer(*layer, {{5}}, 3, {}, [&](const std::vector<Vec>& x, const Vec&) {
      Vec y = x[0];
      for (double& v : y) v = c.f(v);
      return y;
    });
  }
}

TEST(TensorOperationLayer, RefusesWhatItCannotTrain) {
  const auto status = [](const std::string& config) {
    return test::status_of([&] { core::make_layer(operation(config)); });
  };
  EXPECT_EQ(status(R"({"operation": "Power", "arguments": [null, 2]})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"operation": "Add", "arguments": [1.0, 2.0]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"operation": "Add", "arguments": [null]})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"operation": "Add", "arguments": [null, "x"]})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"operation": "Elu", "alpha": 0.5})"), Status::Unsupported);
  EXPECT_EQ(status(R"({"operation": "LeakyRelu", "negative_slope": 0.1})"), Status::Unsupported);
  EXPECT_EQ(status(R"({})"), Status::InvalidArgument);
  EXPECT_EQ(status(R"({"operation": "Add", "arguments": [null, 1.0]})"), Status::Ok);
  EXPECT_EQ(test::status_of([&] {
              core::make_layer(operation(R"({"operation": "Add", "arguments": [null, 1.0]})"))->build_inputs({{2}, {2}});
            }),
            Status::InvalidArgument);  // one input, not two
}

// What Keras 3.15 writes for MobileNetV3's hard_sigmoid, relu6(x + 3) * (1 / 6), and a squeeze-and-
// excite product x * y of (4, 4, 3) by (1, 1, 3).
const char* kKerasConfig = R"({"class_name": "Functional", "config": {"name": "functional", "layers": [
  {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 4, 4, 3], "name": "input_layer"},
   "registered_name": null, "name": "input_layer", "inbound_nodes": []},
  {"module": "keras.src.ops.numpy", "class_name": "Add", "config": {"name": "add"}, "registered_name": "Add", "name": "add",
   "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 4, 3], "dtype": "float32",
     "keras_history": ["input_layer", 0, 0]}}, 3.0], "kwargs": {}}]},
  {"module": "keras.layers", "class_name": "ReLU", "config": {"name": "re_lu", "max_value": 6.0}, "registered_name": null,
   "name": "re_lu", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 4, 3],
     "dtype": "float32", "keras_history": ["add", 0, 0]}}], "kwargs": {}}]},
  {"module": "keras.src.ops.numpy", "class_name": "Multiply", "config": {"name": "multiply"}, "registered_name": "Multiply",
   "name": "multiply", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 4, 3],
     "dtype": "float32", "keras_history": ["re_lu", 0, 0]}}, 0.16666666666666666], "kwargs": {}}]},
  {"module": "keras.layers", "class_name": "GlobalAveragePooling2D", "config": {"name": "gap", "keepdims": true},
   "registered_name": null, "name": "gap", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {
     "shape": [null, 4, 4, 3], "dtype": "float32", "keras_history": ["multiply", 0, 0]}}], "kwargs": {}}]},
  {"module": "keras.layers", "class_name": "Multiply", "config": {"name": "se"}, "registered_name": null, "name": "se",
   "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 4, 3], "dtype": "float32",
     "keras_history": ["multiply", 0, 0]}}, {"class_name": "__keras_tensor__", "config": {"shape": [null, 1, 1, 3],
     "dtype": "float32", "keras_history": ["gap", 0, 0]}}]], "kwargs": {}}]},
  {"module": "keras.src.ops.nn", "class_name": "Gelu", "config": {"name": "gelu", "approximate": true}, "registered_name": "Gelu",
   "name": "gelu", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 4, 3],
     "dtype": "float32", "keras_history": ["se", 0, 0]}}], "kwargs": {}}]}
  ], "input_layers": [["input_layer", 0, 0]], "output_layers": [["gelu", 0, 0]]}})";

double hard_sigmoid(double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; }
double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x))); }

TEST(TensorOperationLayer, KerasOperationNodesLoadPredictAndWriteBack) {
  Model m = Model::from_json(Strategy::mirrored({"cpu"}), kKerasConfig);
  EXPECT_EQ(m.layer_names(), (std::vector<std::string>{"add", "re_lu", "multiply", "gap", "se", "gelu"}));
  m.compile({});
  std::vector<float> x = test::random_floats(2 * 48, 9, -5.0f, 5.0f);
  const std::vector<float> y = m.predict(x.data(), 2);
  ASSERT_EQ(y.size(), x.size());
  for (int r = 0; r < 2; ++r) {
    double mean[3] = {0, 0, 0};
    for (int p = 0; p < 16; ++p)
      for (int c = 0; c < 3; ++c) mean[c] += hard_sigmoid(x[static_cast<size_t>(r * 48 + p * 3 + c)]) / 16;
    for (int p = 0; p < 16; ++p)
      for (int c = 0; c < 3; ++c) {
        const size_t i = static_cast<size_t>(r * 48 + p * 3 + c);
        EXPECT_NEAR(y[i], gelu_tanh(hard_sigmoid(x[i]) * mean[c]), 1e-6) << i;
      }
  }
  // kx's JSON holds the operations as TensorOperation layers, and reads them back.
  const std::string kx_json = m.to_json();
  EXPECT_NE(kx_json.find("TensorOperation"), std::string::npos);
  Model again = Model::from_json(Strategy::mirrored({"cpu"}), kx_json);
  EXPECT_EQ(again.to_json(), kx_json);
  again.compile({});
  EXPECT_EQ(again.predict(x.data(), 2), y);
  // Keras's node, constants in its args.
  const json::Value kx = json::parse(kx_json);
  for (const json::Value& l : kx.at("config", "").at("layers", "").as_array("")) {
    if (l.at("class_name", "").as_string("") != "TensorOperation" || l.at("name", "").as_string("") != "add") continue;
    const std::map<std::string, Shape> shapes{{"input_layer", {4, 4, 3}}};
    const json::Value node = core::keras_operation_node(l, shapes);
    EXPECT_EQ(node.at("module", "").as_string(""), "keras.src.ops.numpy");
    EXPECT_EQ(node.at("class_name", "").as_string(""), "Add");
    const json::Value::Array& args = node.at("inbound_nodes", "").as_array("").at(0).at("args", "").as_array("");
    ASSERT_EQ(args.size(), 2u);
    const json::Value::Array& history = args[0].at("config", "").at("keras_history", "").as_array("");
    ASSERT_EQ(history.size(), 3u);
    EXPECT_EQ(history[0].as_string(""), "input_layer");
    EXPECT_EQ(args[0].at("config", "").at("shape", "").as_array("").size(), 4u);  // the batch axis, then (4, 4, 3)
    EXPECT_EQ(args[1].as_number(""), 3.0);
  }
}

TEST(TensorOperationLayer, UnknownKerasOperationsAreUnsupportedByName) {
  const std::string power = R"({"module": "keras.src.ops.numpy", "class_name": "Power", "config": {"name": "power"},
    "name": "power", "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4],
    "dtype": "float32", "keras_history": ["input_layer", 0, 0]}}, 2], "kwargs": {}}]})";
  try {
    core::layer_spec_from_json(json::parse(power));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("Power"), std::string::npos) << e.what();
  }
}

const std::vector<std::string> kTrainedLayers{
    R"({"class_name": "Dense", "config": {"units": 8}})",
    R"({"class_name": "TensorOperation", "config": {"operation": "Add", "arguments": [null, 3.0]}})",
    R"({"class_name": "ReLU", "config": {"max_value": 6.0}})",
    R"({"class_name": "TensorOperation", "config": {"operation": "TrueDivide", "arguments": [null, 6]}})",
    R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})",
};

TEST(TensorOperationLayer, TwoReplicasTrainAsOne) {
  const std::vector<float> one = test::weights_after_training({6}, kTrainedLayers, 1);
  const std::vector<float> two = test::weights_after_training({6}, kTrainedLayers, 2);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_LE(test::relative_difference(one, two), 1e-5);
}

}  // namespace
}  // namespace kx
