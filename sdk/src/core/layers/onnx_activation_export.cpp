// Keras's activations as ONNX opset 13 nodes. Those without an operator of their own in opset 13
// (relu6, swish, hard_swish, gelu), and hard_sigmoid, are written as the formula Keras computes.
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/layers/onnx_layer_export.hpp"
#include "kx/error.hpp"

namespace kx::core {

using io::OnnxAttribute;

namespace {

constexpr float kLeakySlope = 0.2f;  // Keras's leaky_relu default

using Step = OnnxLayerExport::FormulaStep;

// min(max(v, 0), 6) as 6 - relu(6 - relu(v)): OpenCV 4.6 reads neither opset 13's Clip nor Min with a
// constant (relu_layer.cpp does the same).
constexpr Step kRelu6[] = {{"Relu", "x", "", "relu"},
                           {"Mul", "relu", "$", "negated", "minus_one", -1.0f},
                           {"Add", "negated", "$", "room", "six", 6.0f},
                           {"Relu", "room", "", "room_left"},
                           {"Mul", "room_left", "$", "cut", "minus_one", -1.0f},
                           {"Add", "cut", "$", "", "six", 6.0f}};
// relu6(x + 3) / 6, Keras's hard_sigmoid; hard_swish is x times it.
#define KX_HARD_SIGMOID_STEPS(into)                                                                           \
  {"Add", "x", "$", "shifted", "three", 3.0f}, {"Relu", "shifted", "", "relu"},                              \
      {"Mul", "relu", "$", "negated", "minus_one", -1.0f}, {"Add", "negated", "$", "room", "six", 6.0f},     \
      {"Relu", "room", "", "room_left"}, {"Mul", "room_left", "$", "cut", "minus_one", -1.0f},              \
      {"Add", "cut", "$", "relu6", "six", 6.0f}, {"Div", "relu6", "$", into, "divisor", 6.0f}
constexpr Step kHardSigmoid[] = {KX_HARD_SIGMOID_STEPS("")};
constexpr Step kHardSilu[] = {KX_HARD_SIGMOID_STEPS("hard_sigmoid"), {"Mul", "x", "hard_sigmoid", ""}};
#undef KX_HARD_SIGMOID_STEPS
constexpr Step kSilu[] = {{"Sigmoid", "x", "", "sigmoid"}, {"Mul", "x", "sigmoid", ""}};
// x * (1 + erf(x / sqrt 2)) / 2
constexpr Step kGelu[] = {{"Mul", "x", "$", "scaled", "inv_sqrt2", 0.7071067811865476f},
                          {"Erf", "scaled", "", "erf"},
                          {"Add", "erf", "$", "one_plus", "one", 1.0f},
                          {"Mul", "x", "$", "half_x", "half", 0.5f},
                          {"Mul", "half_x", "one_plus", ""}};
// x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2
constexpr Step kGeluTanh[] = {{"Mul", "x", "x", "x2"},
                              {"Mul", "x2", "x", "x3"},
                              {"Mul", "x3", "$", "cubic_term", "cubic", 0.044715f},
                              {"Add", "x", "cubic_term", "inner"},
                              {"Mul", "inner", "$", "scaled", "scale", 0.7978845608028654f},
                              {"Tanh", "scaled", "", "tanh"},
                              {"Add", "tanh", "$", "one_plus", "one", 1.0f},
                              {"Mul", "x", "$", "half_x", "half", 0.5f},
                              {"Mul", "half_x", "one_plus", ""}};

}  // namespace

OnnxLayerExport::FormulaStep OnnxLayerExport::FormulaStep::of(const char* op, const char* a, const char* b,
                                                               const char* into, const char* constant, float value,
                                                               const char* c) {
  FormulaStep s{};
  const auto put = [](char* field, size_t size, const char* text) { std::snprintf(field, size, "%s", text); };
  put(s.op, sizeof s.op, op);
  put(s.a, sizeof s.a, a);
  put(s.b, sizeof s.b, b);
  put(s.into, sizeof s.into, into);
  put(s.constant, sizeof s.constant, constant);
  put(s.c, sizeof s.c, c);
  s.value = value;
  return s;
}

std::string OnnxLayerExport::formula(std::span<const FormulaStep> steps, const std::string& x, const std::string& out,
                                     std::string_view constant_prefix) {
  std::vector<std::pair<std::string_view, std::string>> constants;  // each made once
  const auto name = [&](std::string_view v, const Step& s) -> std::string {
    if (v == "x") return x;
    if (v != "$") return v.empty() ? out : out + "/" + std::string(v);
    for (const auto& [label, made] : constants)
      if (label == s.constant) return made;
    constants.emplace_back(s.constant, constant(std::string(constant_prefix) + s.constant, {1}, {s.value}));
    return constants.back().second;
  };
  for (const Step& s : steps) {
    std::vector<std::string> inputs{name(s.a, s)};
    for (const char* more : {+s.b, +s.c})
      if (*more) inputs.push_back(name(more, s));
    node(s.op, inputs, {name(s.into, s)});
  }
  return out;
}

std::string OnnxLayerExport::activation(Activation act, const std::string& x, const std::string& out, int64_t axis) {
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
    case Activation::Relu6: return formula(kRelu6, x, out, "activation/");
    case Activation::Silu: return formula(kSilu, x, out, "activation/");
    case Activation::HardSigmoid: return formula(kHardSigmoid, x, out, "activation/");
    case Activation::HardSilu: return formula(kHardSilu, x, out, "activation/");
    case Activation::Gelu: return formula(kGelu, x, out, "activation/");
    case Activation::GeluTanh: return formula(kGeluTanh, x, out, "activation/");
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
