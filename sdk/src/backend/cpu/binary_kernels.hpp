// Element-wise binary operations with NumPy's broadcasting on the CPU (Keras's x * y, the Multiply of
// squeeze-and-excite): the values and gradients of binary_op_math.hpp's forward_at and gradient_at,
// bit for bit, computed a row at a time. Axes with the same broadcast pattern are merged first, so an
// (H, W, C) by (1, 1, C) product is rows of C against one row: the index arithmetic is paid per row,
// not per element, and the rows' loops vectorise.
#pragma once
#include <cstdint>

#include "backend/binary_op_math.hpp"

namespace kx::backend::cpu {

// out[sample, p] = a op b for `rows` samples.
void binary_forward(const BinaryShape& s, int64_t rows, const float* a, const float* b, float* out, int threads);

// d = the gradient of operand `which` (0: a, 1: b) for `rows` samples; where the operand is broadcast,
// its partials summed in double in the output's row-major order, as gradient_at sums them.
void binary_backward(const BinaryShape& s, int64_t rows, int32_t which, const float* a, const float* b,
                     const float* dy, float* d, int threads);

}  // namespace kx::backend::cpu
