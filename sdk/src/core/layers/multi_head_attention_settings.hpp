// MultiHeadAttention's settings, from its Keras config and its call's keyword arguments.
#pragma once
#include <cstdint>

#include "kx/layer.hpp"

namespace kx::core {

struct AttentionSettings {
  int64_t heads = 0, key_dim = 0, value_dim = 0;  // value_dim 0: key_dim (Keras's default)
  int64_t output_dim = 0;                          // 0: the query's features (Keras's output_shape None)
  double dropout = 0;
  bool use_bias = true;
  bool causal = false;  // the call's use_causal_mask
  int mask_input = -1;  // the input that is the call's attention_mask, or -1
};

// The settings of spec (config and call_config); InvalidArgument or Unsupported naming what is wrong.
AttentionSettings read_attention_settings(const LayerSpec& spec);

}  // namespace kx::core
