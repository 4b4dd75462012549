#include "core/layers/tensor_operation_table.hpp"

#include <iterator>

namespace kx::core {
namespace {

using backend::BinaryOp;

constexpr const char* kNumpy = "keras.src.ops.numpy";
constexpr const char* kNn = "keras.src.ops.nn";

// Negative is 0 - x: the same value (up to the sign of a zero) and gradient.
constexpr OperationRow kOperations[] = {
    {"Add", kNumpy, true, BinaryOp::Add, Activation::None},
    {"Subtract", kNumpy, true, BinaryOp::Subtract, Activation::None},
    {"Multiply", kNumpy, true, BinaryOp::Multiply, Activation::None},
    {"Divide", kNumpy, true, BinaryOp::Divide, Activation::None},
    {"TrueDivide", kNumpy, true, BinaryOp::Divide, Activation::None},
    {"Negative", kNumpy, true, BinaryOp::Subtract, Activation::None},
    {"Tanh", kNumpy, false, BinaryOp::Add, Activation::Tanh},
    {"Relu", kNn, false, BinaryOp::Add, Activation::Relu},
    {"Relu6", kNn, false, BinaryOp::Add, Activation::Relu6},
    {"Sigmoid", kNn, false, BinaryOp::Add, Activation::Sigmoid},
    {"Silu", kNn, false, BinaryOp::Add, Activation::Silu},
    {"HardSigmoid", kNn, false, BinaryOp::Add, Activation::HardSigmoid},
    {"HardSilu", kNn, false, BinaryOp::Add, Activation::HardSilu},
    {"Gelu", kNn, false, BinaryOp::Add, Activation::Gelu},
    {"Elu", kNn, false, BinaryOp::Add, Activation::Elu},
    {"LeakyRelu", kNn, false, BinaryOp::Add, Activation::LeakyRelu},
    {"Softplus", kNn, false, BinaryOp::Add, Activation::Softplus},
};

}  // namespace

const OperationRow* find_operation(std::string_view name) {
  for (const OperationRow& r : kOperations)
    if (name == r.name) return &r;
  return nullptr;
}

std::string operation_names() {
  std::string out;
  for (const OperationRow& r : kOperations) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

}  // namespace kx::core
