// Keras 3's operations on tensors that a functional model's config holds beside its layers (x * y,
// x + 3.0, 1.0 - x, keras.ops.gelu(x) ...): kx trains each as a layer, TensorOperation, whose config
// names the operation and its arguments. In kx's JSON it is {"class_name": "TensorOperation",
// "config": {"operation": "Multiply", "arguments": [null, 2.0]}}, null standing for the layer's next
// input; in Keras's it is the operation's node (module keras.src.ops.numpy or .nn, the constants
// among the node's args), which these functions translate both ways.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/json.hpp"
#include "kx/layer.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

// Whether a layer of a Keras model config is an operation's node (its module is keras.src.ops...).
bool is_keras_operation_node(const json::Value& layer);
// The TensorOperation spec of a Keras operation node; Unsupported naming an operation, argument or
// setting kx does not train.
LayerSpec operation_spec_from_keras(const json::Value& layer);
// Keras's node of a TensorOperation layer of kx's functional JSON (class_name, name, config, and
// inbound_nodes [[["input", 0, 0, {}], ...]]); output_shapes: each layer's (and the input's) output
// shape per sample by name, which Keras's nodes write for their tensors.
json::Value keras_operation_node(const json::Value& kx_layer, const std::map<std::string, Shape>& output_shapes);

}  // namespace kx::core
