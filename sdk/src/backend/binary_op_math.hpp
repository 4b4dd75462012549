// Element-wise binary operations with NumPy's broadcasting (Keras 3's x * y, x + 3.0, the Multiply
// merge layer of squeeze-and-excite), as the CPU and CUDA kernels share them (KX_HOST_DEVICE): the
// shape's indexing, each operation's value and its partial derivatives as TensorFlow computes them,
// and the fixed order in which a broadcast operand's gradient is summed.
#pragma once
#include <cstdint>

#include "backend/host_device.hpp"
#include "backend/rounded_math.hpp"

namespace kx::backend {

enum class BinaryOp : int32_t { Add = 0, Subtract = 1, Multiply = 2, Divide = 3 };

inline constexpr int kBinaryMaxRank = 6;

// Two operands a and b of one sample each (channels-last, `rank` axes), broadcast to the output's
// dims: an operand's dim is the output's or 1. One operand may be a scalar instead (scalar_operand 0
// or 1): its pointer is then null and its dims all 1.
struct BinaryShape {
  BinaryOp op = BinaryOp::Add;
  int32_t rank = 1;
  int32_t scalar_operand = -1;  // -1: two tensors; 0: a is `scalar`; 1: b is `scalar`
  float scalar = 0.0f;
  int64_t dims[kBinaryMaxRank] = {};
  int64_t a_dims[kBinaryMaxRank] = {};
  int64_t b_dims[kBinaryMaxRank] = {};
};

namespace binary {

KX_HOST_DEVICE inline int64_t size_of(const int64_t* d, int32_t rank) {
  int64_t n = 1;
  for (int32_t k = 0; k < rank; ++k) n *= d[k];
  return n;
}

// The offset, within an operand of dims od, of output position p (within one sample).
KX_HOST_DEVICE inline int64_t operand_offset(const BinaryShape& s, const int64_t* od, int64_t p) {
  int64_t offset = 0, stride = 1;
  for (int32_t k = s.rank - 1; k >= 0; --k) {
    const int64_t i = p % s.dims[k];
    p /= s.dims[k];
    if (od[k] != 1) offset += i * stride;
    stride *= od[k];
  }
  return offset;
}

KX_HOST_DEVICE inline float value(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return add_rn(a, b);
    case BinaryOp::Subtract: return sub_rn(a, b);
    case BinaryOp::Multiply: return mul_rn(a, b);
    case BinaryOp::Divide: return div_rn(a, b);
  }
  return 0.0f;
}

// Whether the partial derivatives read the operands' values (a sum's and a difference's do not).
KX_HOST_DEVICE inline bool partial_reads_operands(BinaryOp op) {
  return op == BinaryOp::Multiply || op == BinaryOp::Divide;
}

// dy times d(a op b)/d(operand), as TensorFlow's gradients of Add, Sub, Mul and RealDiv compute it.
KX_HOST_DEVICE inline float partial(BinaryOp op, int32_t operand, float a, float b, float dy) {
  switch (op) {
    case BinaryOp::Add: return dy;
    case BinaryOp::Subtract: return operand == 0 ? dy : -dy;
    case BinaryOp::Multiply: return operand == 0 ? mul_rn(dy, b) : mul_rn(a, dy);
    case BinaryOp::Divide: return operand == 0 ? div_rn(dy, b) : mul_rn(dy, div_rn(div_rn(-a, b), b));
  }
  return 0.0f;
}

KX_HOST_DEVICE inline float operand_value(const BinaryShape& s, int32_t which, const float* base, int64_t sample,
                                          int64_t p) {
  if (s.scalar_operand == which) return s.scalar;
  const int64_t* od = which == 0 ? s.a_dims : s.b_dims;
  return base[sample * size_of(od, s.rank) + operand_offset(s, od, p)];
}

// out[sample, p] = a op b.
KX_HOST_DEVICE inline float forward_at(const BinaryShape& s, const float* a, const float* b, int64_t sample, int64_t p) {
  return value(s.op, operand_value(s, 0, a, sample, p), operand_value(s, 1, b, sample, p));
}

// The gradient of element j of operand `which` in `sample`: the partials of every output position
// it reaches, summed in double in the output's row-major order.
KX_HOST_DEVICE inline float gradient_at(const BinaryShape& s, int32_t which, const float* a, const float* b,
                                        const float* dy, int64_t sample, int64_t j) {
  const int64_t* od = which == 0 ? s.a_dims : s.b_dims;
  // j's index on each axis, and how many positions the broadcast axes add.
  int64_t index[kBinaryMaxRank] = {};
  int64_t rest = j, reduced = 1;
  for (int32_t k = s.rank - 1; k >= 0; --k) {
    index[k] = rest % od[k];
    rest /= od[k];
    if (od[k] == 1) reduced *= s.dims[k];
  }
  const int64_t out_size = size_of(s.dims, s.rank);
  const bool reads = partial_reads_operands(s.op);
  double sum = 0.0;
  for (int64_t t = 0; t < reduced; ++t) {
    // Output position: j's index on the operand's own axes, t's on its broadcast ones.
    int64_t p = 0, stride = 1, left = t;
    for (int32_t k = s.rank - 1; k >= 0; --k) {
      int64_t i = index[k];
      if (od[k] == 1) {
        i = left % s.dims[k];
        left /= s.dims[k];
      }
      p += i * stride;
      stride *= s.dims[k];
    }
    const float av = reads ? operand_value(s, 0, a, sample, p) : 0.0f;
    const float bv = reads ? operand_value(s, 1, b, sample, p) : 0.0f;
    sum += partial(s.op, which, av, bv, dy[sample * out_size + p]);
  }
  return static_cast<float>(sum);
}

}  // namespace binary
}  // namespace kx::backend
