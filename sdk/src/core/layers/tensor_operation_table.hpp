// The Keras 3 operations kx trains as TensorOperation layers: each one's class name and module in a
// Keras config, and what it computes in kx.
#pragma once
#include <string>
#include <string_view>

#include "backend/binary_op_math.hpp"
#include "kx/layer.hpp"

namespace kx::core {

struct OperationRow {
  const char* name;    // Keras's class name of the operation ("Multiply")
  const char* module;  // where Keras imports it from ("keras.src.ops.numpy")
  bool binary;         // an element-wise binary operation (op), else an activation
  backend::BinaryOp op;
  Activation activation;
};

// The row of a Keras operation class name, or null.
const OperationRow* find_operation(std::string_view name);
// The names kx has, for messages.
std::string operation_names();

}  // namespace kx::core
