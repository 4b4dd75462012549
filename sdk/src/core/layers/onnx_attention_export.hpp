// MultiHeadAttention at inference as ONNX opset 13 nodes: MatMul projections, per-head Reshape and
// Transpose, MatMul scores with Softmax, Where or Add for the masks (no dropout at inference).
#pragma once
#include <cstdint>

#include "core/layers/onnx_layer_export.hpp"

namespace kx::core {

struct OnnxAttention {
  int64_t heads = 0, key_dim = 0, value_dim = 0, output_dim = 0;
  int attended_inputs = 1;  // query, value, key: value is the query and key the value where absent
  bool use_bias = true;
  bool causal = false;
  bool mask_input = false;  // the layer's last input is the call's attention_mask
  // What a masked score becomes.
  float masked_score = 0;
  // With mask_input: masked positions' attention set to 0 after the softmax (Keras's path with dropout).
  bool zero_masked_attention = false;
};

// The layer's weights in MultiHeadAttention's params() order (kernels [in, heads, dim] and [heads,
// value_dim, output], biases with use_bias).
void export_attention_onnx(OnnxLayerExport& e, const OnnxAttention& a);

}  // namespace kx::core
