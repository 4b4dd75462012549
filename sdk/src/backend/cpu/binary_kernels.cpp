#include "backend/cpu/binary_kernels.hpp"

#include <vector>

#include "backend/cpu/prefetch_rows.hpp"
#include "backend/cpu/target_clones.hpp"

namespace kx::backend::cpu {
namespace {

// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 15;

// The shape with size-1 output axes dropped and neighbouring axes of the same broadcast pattern merged;
// per axis, each operand's stride (0 where it is broadcast).
struct RowShape {
  int32_t rank = 0;
  int64_t dims[kBinaryMaxRank] = {};
  int64_t stride[2][kBinaryMaxRank] = {};
  int64_t operand_size[2] = {1, 1};  // one sample's values
  int64_t outer = 1;                 // rows of the innermost axis per sample
  int64_t inner() const { return dims[rank - 1]; }
  // Where row o (of one sample) starts in operand `which`.
  int64_t row_offset(int which, int64_t o) const {
    int64_t offset = 0;
    for (int32_t k = rank - 2; k >= 0; --k) {
      offset += (o % dims[k]) * stride[which][k];
      o /= dims[k];
    }
    return offset;
  }
  bool inner_full(int which) const { return stride[which][rank - 1] != 0; }
};

RowShape row_shape(const BinaryShape& s) {
  RowShape r;
  bool full[2][kBinaryMaxRank] = {};
  for (int32_t k = 0; k < s.rank; ++k) {
    if (s.dims[k] == 1) continue;
    const bool fa = s.a_dims[k] != 1, fb = s.b_dims[k] != 1;
    if (r.rank > 0 && full[0][r.rank - 1] == fa && full[1][r.rank - 1] == fb) {
      r.dims[r.rank - 1] *= s.dims[k];
    } else {
      full[0][r.rank] = fa, full[1][r.rank] = fb;
      r.dims[r.rank++] = s.dims[k];
    }
  }
  if (r.rank == 0) {  // one value per sample
    r.rank = 1;
    r.dims[0] = 1;
    full[0][0] = full[1][0] = true;
  }
  for (int w = 0; w < 2; ++w) {
    int64_t stride = 1;
    for (int32_t k = r.rank - 1; k >= 0; --k) {
      r.stride[w][k] = full[w][k] ? stride : 0;
      if (full[w][k]) stride *= r.dims[k];
    }
    r.operand_size[w] = stride;
  }
  for (int32_t k = 0; k + 1 < r.rank; ++k) r.outer *= r.dims[k];
  return r;
}

// One operand's row: its values, or one value for every position (broadcast, or the scalar).
struct RowOperand {
  const float* values;
  float broadcast;
};

RowOperand row_operand(const BinaryShape& s, const RowShape& r, int which, const float* base, int64_t sample,
                       int64_t o) {
  if (s.scalar_operand == which) return {nullptr, s.scalar};
  const float* row = base + sample * r.operand_size[which] + r.row_offset(which, o);
  return r.inner_full(which) ? RowOperand{row, 0.0f} : RowOperand{nullptr, row[0]};
}

template <BinaryOp Op>
void forward_row(int64_t n, RowOperand a, RowOperand b, float* out) {
  if (a.values && b.values) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) out[l] = binary::value(Op, a.values[l], b.values[l]);
  } else if (a.values) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) out[l] = binary::value(Op, a.values[l], b.broadcast);
  } else if (b.values) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) out[l] = binary::value(Op, a.broadcast, b.values[l]);
  } else {
    const float v = binary::value(Op, a.broadcast, b.broadcast);
    for (int64_t l = 0; l < n; ++l) out[l] = v;
  }
}

void forward_row(BinaryOp op, int64_t n, RowOperand a, RowOperand b, float* out) {
  switch (op) {
    case BinaryOp::Add: return forward_row<BinaryOp::Add>(n, a, b, out);
    case BinaryOp::Subtract: return forward_row<BinaryOp::Subtract>(n, a, b, out);
    case BinaryOp::Multiply: return forward_row<BinaryOp::Multiply>(n, a, b, out);
    case BinaryOp::Divide: return forward_row<BinaryOp::Divide>(n, a, b, out);
  }
}

float at(const RowOperand& x, int64_t l) { return x.values ? x.values[l] : x.broadcast; }

// An operand as large as the output streams through it: the rows ahead of each such one
// (prefetch_rows.hpp); a broadcast operand's few values stay in cache.
void prefetch_full_operands(const RowShape& r, RowOperand a, RowOperand b, int64_t out_size, int64_t n) {
  if (a.values && r.operand_size[0] == out_size) prefetch_row(a.values + prefetch_offset(n), n);
  if (b.values && r.operand_size[1] == out_size) prefetch_row(b.values + prefetch_offset(n), n);
}

// Multiply's partials over one output row, dy times the other operand: stored (out), or added into
// the double sums of the operand's row (full_sum). Squeeze-and-excite's and gating's products train
// through here; without the generic loop's per-element choices the loops vectorise.
KX_CLONES_AVX2 void multiply_partials(int64_t n, RowOperand other, const float* g, float* out, double* full_sum) {
  const float* v = other.values;
  const float c = other.broadcast;
  if (out && v) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) out[l] = mul_rn(g[l], v[l]);
  } else if (out) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) out[l] = mul_rn(g[l], c);
  } else if (v) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) full_sum[l] += static_cast<double>(mul_rn(g[l], v[l]));
  } else {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) full_sum[l] += static_cast<double>(mul_rn(g[l], c));
  }
}

}  // namespace

void binary_forward(const BinaryShape& s, int64_t rows, const float* a, const float* b, float* out, int threads) {
  const RowShape r = row_shape(s);
  const int64_t n = r.inner(), row_count = rows * r.outer, out_size = r.outer * n;
#pragma omp parallel for num_threads(threads) if (row_count * n >= kParallelValues)
  for (int64_t i = 0; i < row_count; ++i) {
    const int64_t sample = i / r.outer, o = i % r.outer;
    const RowOperand av = row_operand(s, r, 0, a, sample, o), bv = row_operand(s, r, 1, b, sample, o);
    prefetch_full_operands(r, av, bv, out_size, n);
    forward_row(s.op, n, av, bv, out + i * n);
  }
}

void binary_backward(const BinaryShape& s, int64_t rows, int32_t which, const float* a, const float* b,
                     const float* dy, float* d, int threads) {
  const RowShape r = row_shape(s);
  const int64_t n = r.inner(), size = r.operand_size[which], out_size = r.outer * n;
  const bool reads = binary::partial_reads_operands(s.op);
  // Each output row's partials, added to the operand's values they came from, rows in order: every
  // value's sum then runs over its output positions in increasing order, gradient_at's order.
#pragma omp parallel for num_threads(threads) if (rows * out_size >= kParallelValues)
  for (int64_t sample = 0; sample < rows; ++sample) {
    std::vector<double> sum(size == out_size ? 0 : static_cast<size_t>(size), 0.0);
    for (int64_t o = 0; o < r.outer; ++o) {
      const RowOperand av = reads ? row_operand(s, r, 0, a, sample, o) : RowOperand{nullptr, 0.0f};
      const RowOperand bv = reads ? row_operand(s, r, 1, b, sample, o) : RowOperand{nullptr, 0.0f};
      const float* g = dy + sample * out_size + o * n;
      prefetch_row(g + prefetch_offset(n), n);
      prefetch_full_operands(r, av, bv, out_size, n);
      const bool whole_row = size == out_size || r.inner_full(which);
      if (s.op == BinaryOp::Multiply && whole_row) {
        multiply_partials(n, which == 0 ? bv : av, g, size == out_size ? d + sample * size + o * n : nullptr,
                          size == out_size ? nullptr : sum.data() + r.row_offset(which, o));
        continue;
      }
      if (size == out_size) {  // not broadcast: each value has one partial, its float exactly
        float* out = d + sample * size + o * n;
        for (int64_t l = 0; l < n; ++l) out[l] = binary::partial(s.op, which, at(av, l), at(bv, l), g[l]);
        continue;
      }
      double* target = sum.data() + r.row_offset(which, o);
      if (r.inner_full(which)) {
        for (int64_t l = 0; l < n; ++l) target[l] += binary::partial(s.op, which, at(av, l), at(bv, l), g[l]);
      } else {
        double t = *target;
        for (int64_t l = 0; l < n; ++l) t += binary::partial(s.op, which, at(av, l), at(bv, l), g[l]);
        *target = t;
      }
    }
    if (size == out_size) continue;
    float* out = d + sample * size;
    for (int64_t j = 0; j < size; ++j) out[j] = static_cast<float>(sum[static_cast<size_t>(j)]);
  }
}

}  // namespace kx::backend::cpu
