#include "core/layers/keras_masked_add.hpp"

#include "core/layers/broadcast_shape.hpp"

namespace kx::core {

int64_t MaskedAdd::workspace_floats(int64_t rows) const { return rows * (3 * steps + steps * features); }

void MaskedAdd::coefficients(backend::Backend& be, int64_t rows, const float* m0, const float* m1, float* a0,
                             float* a1) const {
  const int64_t n = rows * steps;
  if (m0 && m1) {
    // a0 = m0 m1 + 2 (1 - m1), a1 = m1 (2 - m0): the table above for masks of 1 and 0.
    be.multiply(n, m0, m1, a1);
    be.scale_shift(n, -2.0f, 2.0f, m1, a0);
    be.add(n, a0, a1, a0);
    be.scale_shift(n, -1.0f, 2.0f, m0, a1);
    be.multiply(n, a1, m1, a1);
  } else if (m0) {  // x1 counts everywhere: a0 = m0, a1 = 2 - m0
    be.copy(n, m0, a0);
    be.scale_shift(n, -1.0f, 2.0f, m0, a1);
  } else {  // x0 counts everywhere: a0 = 2 - m1, a1 = m1
    be.scale_shift(n, -1.0f, 2.0f, m1, a0);
    be.copy(n, m1, a1);
  }
}

void MaskedAdd::scale_steps(backend::Backend& be, int64_t rows, const float* a, const float* x, float* out) const {
  const backend::BinaryShape s =
      broadcast_shape(backend::BinaryOp::Multiply, {steps, 1}, {steps, features}, "a masked Add");
  be.binary_forward(s, rows, a, x, out);
}

void MaskedAdd::forward(backend::Backend& be, int64_t rows, const float* m0, const float* m1, const float* x0,
                        const float* x1, float* y, float* workspace) const {
  float* a0 = workspace;
  float* a1 = a0 + rows * steps;
  float* term = a1 + rows * steps + rows * steps;
  coefficients(be, rows, m0, m1, a0, a1);
  scale_steps(be, rows, a0, x0, y);
  scale_steps(be, rows, a1, x1, term);
  be.add(rows * steps * features, y, term, y);
}

void MaskedAdd::backward(backend::Backend& be, int64_t rows, const float* m0, const float* m1, const float* dy,
                         float* dx0, float* dx1, float* workspace) const {
  float* a0 = workspace;
  float* a1 = a0 + rows * steps;
  coefficients(be, rows, m0, m1, a0, a1);
  if (dx0) scale_steps(be, rows, a0, dy, dx0);
  if (dx1) scale_steps(be, rows, a1, dy, dx1);
}

void MaskedAdd::output_mask(backend::Backend& be, int64_t rows, const float* m0, const float* m1, float* mask,
                            float* workspace) const {
  // m0 OR m1 = m0 + m1 - m0 m1 for masks of 1 and 0.
  const int64_t n = rows * steps;
  be.multiply(n, m0, m1, workspace);
  be.add(n, m0, m1, mask);
  be.scaled_difference(n, 1.0f, mask, workspace, mask);
}

}  // namespace kx::core
