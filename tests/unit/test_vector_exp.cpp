// The CPU's vectorised exp, sigmoid and tanh (softmax's, the LSTM's) against double-precision exp over the whole float range, and
// softmax rows built on it against a float64 softmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/activation_kernels.hpp"
#include "backend/cpu/vector_math.hpp"

namespace kx {
namespace {

using backend::cpu::vector_exp;

TEST(VectorExp, WithinFourUlpOfExpOverTheNormalRange) {
  // Normal results: exp(x) >= FLT_MIN for x >= -87.33.
  double worst = 0.0;
  for (float x = -87.3f; x < 88.72f; x += 0.000731f) {
    const double exact = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    const double err = std::fabs(static_cast<double>(vector_exp(x)) - exact) / ulp;
    worst = std::max(worst, err);
    ASSERT_LE(err, 4.0) << "x " << x;
  }
  EXPECT_GT(worst, 0.0);  // the sweep compared something
}

TEST(VectorExp, SubnormalsZeroInfinityAndNaN) {
  for (float x = -104.0f; x < -87.3f; x += 0.01f)
    EXPECT_NEAR(vector_exp(x), std::exp(static_cast<double>(x)), 3e-45) << x;
  EXPECT_EQ(vector_exp(-105.0f), 0.0f);
  EXPECT_EQ(vector_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(vector_exp(-1e9f), 0.0f);
  EXPECT_EQ(vector_exp(0.0f), 1.0f);
  EXPECT_EQ(vector_exp(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(vector_exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(vector_exp(std::numeric_limits<float>::quiet_NaN())));
}

// Error of `f` against the double function `exact` in units of the float result's last place.
template <class F, class Exact>
double worst_ulps(float from, float to, float step, F f, Exact exact) {
  double worst = 0.0;
  for (float x = from; x < to; x += step) {
    const double want = exact(static_cast<double>(x));
    if (want == 0.0) continue;
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(static_cast<double>(f(x)) - want) / ulp);
  }
  return worst;
}

TEST(VectorExp, SigmoidAndTanhWithinFewUlp) {
  const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  const auto tanh = [](double x) { return std::tanh(x); };
  EXPECT_LE(worst_ulps(-80.0f, 80.0f, 0.000917f, backend::cpu::vector_sigmoid, sigmoid), 4.0);
  EXPECT_LE(worst_ulps(-12.0f, 12.0f, 0.000317f, backend::cpu::vector_tanh, tanh), 4.0);
  EXPECT_LE(worst_ulps(-0.01f, 0.01f, 0.0000013f, backend::cpu::vector_tanh, tanh), 2.0);  // near 0: no cancellation
  EXPECT_EQ(backend::cpu::vector_tanh(50.0f), 1.0f);
  EXPECT_EQ(backend::cpu::vector_tanh(-50.0f), -1.0f);
  EXPECT_EQ(backend::cpu::vector_sigmoid(-200.0f), 0.0f);
  EXPECT_EQ(backend::cpu::vector_sigmoid(200.0f), 1.0f);
  EXPECT_TRUE(std::isnan(backend::cpu::vector_tanh(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(backend::cpu::vector_sigmoid(std::numeric_limits<float>::quiet_NaN())));
}

// Swish and its gradient through the spans the layers call (with AVX-512, its own sigmoid): within a few
// ulp of float64 wherever the result is a normal float, in spans whose length is no multiple of a vector;
// 0 far below, x far above, NaN through.
TEST(VectorExp, SwishSpansWithinFewUlp) {
  std::vector<float> x;
  for (float v = -87.0f; v < 88.0f; v += 0.00113f) x.push_back(v);
  x.push_back(0.0f);
  std::vector<float> y(x.size()), dy(x.size(), 1.0f), dx(x.size());
  backend::cpu::pointwise_activation_span(Activation::Silu, static_cast<int64_t>(x.size()), x.data(), y.data());
  backend::cpu::pointwise_activation_backward_span(Activation::Silu, static_cast<int64_t>(x.size()), x.data(), dy.data(),
                                                   dx.data());
  double worst = 0.0, worst_grad = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], s = 1.0 / (1.0 + std::exp(-v)), want = v * s, grad = s * (1.0 + v * (1.0 - s));
    if (std::fabs(want) >= 1e-37) worst = std::max(worst, std::fabs(y[i] - want) / std::ldexp(1.0, std::ilogb(want) - 23));
    // The gradient's 1 - s and 1 + x (1 - s) cancel near x = -1.28: a bound of 2^-26 there.
    if (std::fabs(grad) >= 1e-37)
      worst_grad = std::max(worst_grad, std::fabs(dx[i] - grad) / std::max(std::fabs(grad) * 0x1p-23, 0x1p-26));
  }
  EXPECT_LE(worst, 4.0);
  EXPECT_LE(worst_grad, 12.0);  // TensorFlow's formula itself rounds 1 - s: about 8 units in float32
  EXPECT_GT(worst, 0.0);  // the sweep compared something
  const float far[] = {-120.0f, 100.0f, std::numeric_limits<float>::quiet_NaN()};
  float far_y[3], far_dx[3];
  const float ones[] = {1.0f, 1.0f, 1.0f};
  backend::cpu::pointwise_activation_span(Activation::Silu, 3, far, far_y);
  backend::cpu::pointwise_activation_backward_span(Activation::Silu, 3, far, ones, far_dx);
  EXPECT_EQ(far_y[0], -0.0f);
  EXPECT_EQ(far_y[1], 100.0f);
  EXPECT_TRUE(std::isnan(far_y[2]));
  EXPECT_EQ(far_dx[0], 0.0f);
  EXPECT_EQ(far_dx[1], 1.0f);
  EXPECT_TRUE(std::isnan(far_dx[2]));
}

TEST(VectorExp, SoftmaxRowsMatchFloat64) {
  const int64_t rows = 7, cols = 67;  // not a multiple of any vector width
  std::vector<float> y(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 30.0);
  y[5] = -1e9f;  // a masked score
  const std::vector<float> x = y;
  backend::cpu::softmax_rows(rows, cols, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    // The shifted scores as float32 computes them (their rounding is the input's, not exp's).
    float top = x[r * cols];
    for (int64_t j = 0; j < cols; ++j) top = std::max(top, x[r * cols + j]);
    const auto shifted = [&](int64_t j) { return static_cast<double>(x[r * cols + j] - top); };
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(shifted(j));
    for (int64_t j = 0; j < cols; ++j) {
      const double want = std::exp(shifted(j)) / sum;
      EXPECT_NEAR(y[r * cols + j], want, 1e-6 * want + 1e-30) << r << "," << j;
    }
  }
  EXPECT_EQ(y[5], 0.0f);
}

}  // namespace
}  // namespace kx
