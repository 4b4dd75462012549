// Keras's masks in a Functional config. Keras writes the mask of Embedding(mask_zero=True) into the
// graph as an op node, not_equal(ids, 0), and hands it to the layers after it as their "mask"
// argument, and Masking's as any(not_equal(x, mask_value), axis=-1); kx carries those masks itself
// (Layer::computes_mask, passes_mask). So those nodes and arguments are dropped, when a node is
// exactly such a mask: a NotEqual of an Embedding's input (one with mask_zero) and 0, an Any over the
// last axis of a NotEqual of a Masking's input and its mask_value (and that NotEqual), or a LogicalOr /
// LogicalAnd of such masks alone (Add's merged mask). Any other op node stays, and is refused as ops
// are.
#pragma once

#include "io/json.hpp"

namespace kx::core {

// The model config (Keras's {"class_name": "Functional", "config": ...}) without its mask nodes;
// other models as they are.
json::Value without_keras_mask_nodes(const json::Value& model);

}  // namespace kx::core
