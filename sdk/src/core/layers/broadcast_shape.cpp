#include "core/layers/broadcast_shape.hpp"

#include "kx/error.hpp"

namespace kx::core {

namespace {

void require_rank(const Shape& s, const std::string& what) {
  require(!s.empty() && s.size() <= static_cast<size_t>(backend::kBinaryMaxRank), Status::Unsupported,
          what + ": samples of shape " + to_string(s) + " (rank 1 to " + std::to_string(backend::kBinaryMaxRank) +
              " is supported)");
}

}  // namespace

backend::BinaryShape broadcast_shape(backend::BinaryOp op, const Shape& a, const Shape& b, const std::string& what) {
  require_rank(a, what);
  require(a.size() == b.size(), Status::InvalidArgument,
          what + ": inputs of shapes " + to_string(a) + " and " + to_string(b) +
              " have different ranks (broadcasting needs equal ranks)");
  backend::BinaryShape s;
  s.op = op;
  s.rank = static_cast<int32_t>(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    require(a[k] == b[k] || a[k] == 1 || b[k] == 1, Status::InvalidArgument,
            what + ": inputs of shapes " + to_string(a) + " and " + to_string(b) + " cannot be broadcast (axis " +
                std::to_string(k + 1) + ")");
    s.dims[k] = a[k] == 1 ? b[k] : a[k];
    s.a_dims[k] = a[k];
    s.b_dims[k] = b[k];
  }
  return s;
}

backend::BinaryShape scalar_shape(backend::BinaryOp op, const Shape& x, int32_t scalar_operand, float scalar,
                                  const std::string& what) {
  require_rank(x, what);
  backend::BinaryShape s;
  s.op = op;
  s.rank = static_cast<int32_t>(x.size());
  s.scalar_operand = scalar_operand;
  s.scalar = scalar;
  for (size_t k = 0; k < x.size(); ++k) {
    s.dims[k] = x[k];
    s.a_dims[k] = scalar_operand == 0 ? 1 : x[k];
    s.b_dims[k] = scalar_operand == 1 ? 1 : x[k];
  }
  return s;
}

Shape output_shape(const backend::BinaryShape& s) { return Shape(s.dims, s.dims + s.rank); }

int64_t operand_size(const backend::BinaryShape& s, int32_t which) {
  return backend::binary::size_of(which == 0 ? s.a_dims : s.b_dims, s.rank);
}

}  // namespace kx::core
