// The shapes of an element-wise binary operation between a layer's inputs (NumPy's broadcasting of
// two samples) or between an input and a scalar, as the backend's binary kernels take them.
#pragma once
#include <string>

#include "backend/binary_op_math.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

// a op b for samples of shapes a and b: equal ranks (at most kBinaryMaxRank), each axis equal or 1
// in one of them (InvalidArgument naming `what` otherwise).
backend::BinaryShape broadcast_shape(backend::BinaryOp op, const Shape& a, const Shape& b, const std::string& what);
// x op scalar (scalar_operand 1) or scalar op x (scalar_operand 0), x of shape `x`.
backend::BinaryShape scalar_shape(backend::BinaryOp op, const Shape& x, int32_t scalar_operand, float scalar,
                                  const std::string& what);
// The output's shape.
Shape output_shape(const backend::BinaryShape& s);
// Elements of one sample of operand `which` (0 for a, 1 for b).
int64_t operand_size(const backend::BinaryShape& s, int32_t which);

}  // namespace kx::core
