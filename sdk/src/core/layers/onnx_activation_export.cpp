// Keras's activations as ONNX opset 13 nodes. Those without an operator of their own in opset 13
// (relu6, swish, hard_swish, gelu), and hard_sigmoid, are written as the formula Keras computes.
#include "core/layers/onnx_layer_export.hpp"
#include "kx/error.hpp"

namespace kx::core {

using io::OnnxAttribute;

namespace {

constexpr float kLeakySlope = 0.2f;  // Keras's leaky_relu default

}  // namespace

std::string OnnxLayerExport::activation(Activation act, const std::string& x, const std::string& out, int64_t axis) {
  // Constants of the layer's one activation: one element, broadcast.
  const auto scalar = [&](const std::string& what, float v) { return constant("activation/" + what, {1}, {v}); };
  const auto step = [&](const std::string& what) { return out + "/" + what; };
  // min(max(v, 0), 6) as 6 - relu(6 - relu(v)): OpenCV 4.6 reads neither opset 13's Clip nor Min with
  // a constant (relu_layer.cpp does the same).
  const auto relu6 = [&](const std::string& v, const std::string& into) {
    const std::string six = scalar("six", 6.0f), minus_one = scalar("minus_one", -1.0f);
    node("Relu", {v}, {step("relu")});
    node("Mul", {step("relu"), minus_one}, {step("negated")});
    node("Add", {step("negated"), six}, {step("room")});
    node("Relu", {step("room")}, {step("room_left")});
    node("Mul", {step("room_left"), minus_one}, {step("cut")});
    node("Add", {step("cut"), six}, {into});
  };
  // relu6(x + 3) / 6, Keras's hard_sigmoid, into `into`.
  const auto hard_sigmoid = [&](const std::string& into) {
    node("Add", {x, scalar("three", 3.0f)}, {step("shifted")});
    relu6(step("shifted"), step("relu6"));
    node("Div", {step("relu6"), scalar("divisor", 6.0f)}, {into});
  };
  switch (act) {
    case Activation::None:
      return x;
    case Activation::Relu:
      node("Relu", {x}, {out});
      return out;
    case Activation::Sigmoid:
      node("Sigmoid", {x}, {out});
      return out;
    case Activation::Tanh:
      node("Tanh", {x}, {out});
      return out;
    case Activation::Softmax:
      node("Softmax", {x}, {out}, {OnnxAttribute::integer("axis", axis)});
      return out;
    case Activation::Relu6:
      relu6(x, out);
      return out;
    case Activation::Silu:
      node("Sigmoid", {x}, {step("sigmoid")});
      node("Mul", {x, step("sigmoid")}, {out});
      return out;
    case Activation::HardSigmoid:
      hard_sigmoid(out);
      return out;
    case Activation::HardSilu:
      hard_sigmoid(step("hard_sigmoid"));
      node("Mul", {x, step("hard_sigmoid")}, {out});
      return out;
    case Activation::Gelu:  // x * (1 + erf(x / sqrt 2)) / 2
      node("Mul", {x, scalar("inv_sqrt2", 0.7071067811865476f)}, {step("scaled")});
      node("Erf", {step("scaled")}, {step("erf")});
      node("Add", {step("erf"), scalar("one", 1.0f)}, {step("one_plus")});
      node("Mul", {x, scalar("half", 0.5f)}, {step("half_x")});
      node("Mul", {step("half_x"), step("one_plus")}, {out});
      return out;
    case Activation::GeluTanh:  // x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2
      node("Mul", {x, x}, {step("x2")});
      node("Mul", {step("x2"), x}, {step("x3")});
      node("Mul", {step("x3"), scalar("cubic", 0.044715f)}, {step("cubic_term")});
      node("Add", {x, step("cubic_term")}, {step("inner")});
      node("Mul", {step("inner"), scalar("scale", 0.7978845608028654f)}, {step("scaled")});
      node("Tanh", {step("scaled")}, {step("tanh")});
      node("Add", {step("tanh"), scalar("one", 1.0f)}, {step("one_plus")});
      node("Mul", {x, scalar("half", 0.5f)}, {step("half_x")});
      node("Mul", {step("half_x"), step("one_plus")}, {out});
      return out;
    case Activation::Elu:
      node("Elu", {x}, {out}, {OnnxAttribute::real("alpha", 1.0f)});
      return out;
    case Activation::LeakyRelu:
      node("LeakyRelu", {x}, {out}, {OnnxAttribute::real("alpha", kLeakySlope)});
      return out;
    case Activation::Softplus:
      node("Softplus", {x}, {out});
      return out;
  }
  not_exportable("an unknown activation");
}

}  // namespace kx::core
