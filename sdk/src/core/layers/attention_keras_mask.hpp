// MultiHeadAttention's mask from its inputs' Keras masks, as Keras 3's _compute_attention_mask makes
// it: query position i of a sample may attend to position j where query_mask[i], value_mask[j] and
// key_mask[j] all hold (each [rows, steps] of 1 or 0, null for none). The call's attention_mask and
// use_causal_mask are ANDed on top by the layer (attention_mask_fill, once per mask).
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::core {

// Writes the mask, [rows, tq, tv] of 1 or 0, into `out` and returns it; returns null (writing nothing)
// when no mask is given.
const float* attention_keras_mask(backend::Backend& be, int64_t rows, int64_t tq, int64_t tv, const float* query_mask,
                                  const float* value_mask, const float* key_mask, float* out);

}  // namespace kx::core
