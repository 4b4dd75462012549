#include "core/layers/attention_keras_mask.hpp"

#include "core/layers/broadcast_shape.hpp"

namespace kx::core {

const float* attention_keras_mask(backend::Backend& be, int64_t rows, int64_t tq, int64_t tv, const float* query_mask,
                                  const float* value_mask, const float* key_mask, float* out) {
  if (!query_mask && !value_mask && !key_mask) return nullptr;
  const int64_t n = rows * tq * tv;
  // All ones, then each mask multiplied in, broadcast over the other axis (1 and 0 multiply exactly).
  be.fill_zero(static_cast<size_t>(n) * sizeof(float), out);
  be.scale_shift(n, 0.0f, 1.0f, out, out);
  const auto times = [&](const float* mask, const Shape& dims) {
    if (!mask) return;
    be.binary_forward(broadcast_shape(backend::BinaryOp::Multiply, {tq, tv}, dims, "MultiHeadAttention's mask"), rows,
                      out, mask, out);
  };
  times(query_mask, {tq, 1});
  times(value_mask, {1, tv});
  times(key_mask, {1, tv});
  return out;
}

}  // namespace kx::core
