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
