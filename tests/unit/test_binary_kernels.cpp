// The CPU's row-wise broadcasting binary kernels against binary_op_math.hpp's per-element forward_at
// and gradient_at (the CUDA kernels' definition): the same bits for every operation, every broadcast
// pattern (either operand, both, a scalar, none) and both operands' gradients, on one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/binary_op_math.hpp"
#include "backend/cpu/binary_kernels.hpp"

namespace kx {
namespace {

using backend::BinaryOp;
using backend::BinaryShape;
namespace binary = backend::binary;

BinaryShape shape_of(BinaryOp op, std::vector<int64_t> a, std::vector<int64_t> b, int32_t scalar_operand = -1) {
  BinaryShape s;
  s.op = op;
  s.rank = static_cast<int32_t>(a.size());
  s.scalar_operand = scalar_operand;
  s.scalar = 1.75f;
  for (int32_t k = 0; k < s.rank; ++k) {
    s.a_dims[k] = scalar_operand == 0 ? 1 : a[static_cast<size_t>(k)];
    s.b_dims[k] = scalar_operand == 1 ? 1 : b[static_cast<size_t>(k)];
    s.dims[k] = std::max(a[static_cast<size_t>(k)], b[static_cast<size_t>(k)]);
  }
  return s;
}

std::vector<float> random_values(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> magnitude(0.5f, 2.0f);  // away from 0: divisions stay finite
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

std::string describe(const BinaryShape& s) {
  std::string t = "op ";
  t += std::to_string(static_cast<int>(s.op));
  t += " scalar ";
  t += std::to_string(s.scalar_operand);
  for (const int64_t* dims : {s.a_dims, s.b_dims}) {
    t += dims == s.a_dims ? " a" : " b";
    for (int32_t k = 0; k < s.rank; ++k) {
      t += ' ';
      t += std::to_string(dims[k]);
    }
  }
  return t;
}

void expect_same_bits(const BinaryShape& s, int threads) {
  constexpr int64_t kRows = 3;
  std::mt19937 rng(7);
  const int64_t out_size = binary::size_of(s.dims, s.rank);
  const int64_t size[2] = {binary::size_of(s.a_dims, s.rank), binary::size_of(s.b_dims, s.rank)};
  const std::vector<float> a = random_values(kRows * size[0], rng), b = random_values(kRows * size[1], rng),
                           dy = random_values(kRows * out_size, rng);
  const float* pa = s.scalar_operand == 0 ? nullptr : a.data();
  const float* pb = s.scalar_operand == 1 ? nullptr : b.data();

  std::vector<float> out(static_cast<size_t>(kRows * out_size));
  backend::cpu::binary_forward(s, kRows, pa, pb, out.data(), threads);
  for (int64_t i = 0; i < kRows * out_size; ++i) {
    const float want = binary::forward_at(s, pa, pb, i / out_size, i % out_size);
    ASSERT_EQ(std::memcmp(&want, &out[static_cast<size_t>(i)], sizeof(float)), 0)
        << describe(s) << ": output " << i << " is " << out[static_cast<size_t>(i)] << ", want " << want;
  }
  for (int32_t which = 0; which < 2; ++which) {
    if (s.scalar_operand == which) continue;
    std::vector<float> d(static_cast<size_t>(kRows * size[which]));
    backend::cpu::binary_backward(s, kRows, which, pa, pb, dy.data(), d.data(), threads);
    for (int64_t j = 0; j < kRows * size[which]; ++j) {
      const float want = binary::gradient_at(s, which, pa, pb, dy.data(), j / size[which], j % size[which]);
      ASSERT_EQ(std::memcmp(&want, &d[static_cast<size_t>(j)], sizeof(float)), 0)
          << describe(s) << ": gradient of operand " << which << " at " << j << " is " << d[static_cast<size_t>(j)]
          << ", want " << want;
    }
  }
}

TEST(BinaryKernels, RowsGiveThePerElementDefinitionsBitsForEveryBroadcast) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{4, 5, 3}, {1, 1, 3}},           // squeeze-and-excite: (H, W, C) by (1, 1, C)
      {{1, 1, 3}, {4, 5, 3}},           // the same, operands swapped
      {{4, 5, 3}, {4, 5, 3}},           // no broadcast
      {{4, 5, 3}, {4, 1, 3}},           // a middle axis
      {{4, 5, 3}, {4, 5, 1}},           // the innermost axis
      {{1, 5, 1}, {4, 1, 3}},           // both operands broadcast
      {{2, 3, 4, 5}, {2, 1, 4, 1}},     // alternating
      {{1, 5, 3}, {1, 5, 1}},           // a size-1 output axis
      {{7}, {1}},                        // rank 1, one value
      {{1, 1}, {1, 1}},                  // one value each
      {{3, 1, 200}, {3, 64, 1}},        // wider rows
  };
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::Divide})
    for (const auto& [a, b] : shapes)
      for (int threads : {1, 2}) {
        expect_same_bits(shape_of(op, a, b), threads);
        expect_same_bits(shape_of(op, a, b, 0), threads);
        expect_same_bits(shape_of(op, a, b, 1), threads);
      }
}

TEST(BinaryKernels, LargeOutputsSplitOverThreadsGiveTheSameBits) {
  // Over the parallel threshold: rows split between threads must not change any value or sum.
  expect_same_bits(shape_of(BinaryOp::Multiply, {16, 16, 96}, {1, 1, 96}), 2);
  expect_same_bits(shape_of(BinaryOp::Divide, {1, 16, 96}, {16, 16, 1}), 2);
}

}  // namespace
}  // namespace kx
