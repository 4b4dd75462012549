// The math that the CUDA kernels share with the host (KX_HOST_DEVICE), run here on the CPU against the
// CPU backend: whatever order or rounding the device code would get wrong shows up without a GPU.
// - The windows' backward passes, one element at a time (window_math.hpp), must give the CPU backend's
//   bits: a device thread gathers what the CPU scatters, so the sums must visit the windows in its order.
// - The activations' backward formulas (activation_math.hpp) must be rounded operation by operation:
//   a fused multiply-add in tanh's 1 - y*y changes the leading digits near |y| = 1.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "backend/activation_math.hpp"
#include "backend/backend.hpp"
#include "backend/window_math.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Window2d;

Window2d geometry(int64_t in_h, int64_t in_w, int64_t channels, int64_t k, int64_t stride, int64_t pad) {
  Window2d g;
  g.in_h = in_h, g.in_w = in_w, g.channels = channels, g.k_h = k, g.k_w = k, g.stride_h = stride, g.stride_w = stride;
  g.pad_top = pad, g.pad_left = pad;
  g.out_h = (in_h + 2 * pad - k) / stride + 1, g.out_w = (in_w + 2 * pad - k) / stride + 1;
  return g;
}

// Every input element of `rows` samples, computed by f(r, y, x, c) as a device thread would.
template <class F>
std::vector<float> gathered(const Window2d& g, int64_t rows, F f) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t y = 0; y < g.in_h; ++y)
      for (int64_t x = 0; x < g.in_w; ++x)
        for (int64_t c = 0; c < g.channels; ++c) out.push_back(f(r, y, x, c));
  return out;
}

// The geometries of the desk-check's replays (3x3 stride 1 with and without padding, 5x5 stride 2
// padded) and the pooling ones (overlapping 3x3 stride 1 and 3x3 stride 2, tiling 2x2 stride 2), with a
// channel count above and below the CPU's vector width.
using Case = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // kernel, stride, padding, channels

class WindowMath : public ::testing::TestWithParam<Case> {};

TEST_P(WindowMath, Col2imGatheredInTheCpusOrderGivesItsBits) {
  const auto [k, stride, pad, channels] = GetParam();
  const Window2d g = geometry(11, 9, channels, k, stride, pad);
  const int64_t rows = 3;
  const auto be = backend::make_cpu_backend(2);
  const std::vector<float> col = test::random_floats(static_cast<size_t>(rows * g.out_h * g.out_w * g.patch()), 7);
  std::vector<float> dx(static_cast<size_t>(rows * g.in_h * g.in_w * channels));
  be->col2im(g, rows, col.data(), dx.data());
  EXPECT_EQ(gathered(g, rows, [&](int64_t r, int64_t y, int64_t x, int64_t c) {
              return backend::col2im_value(g, col.data(), r, y, x, c);
            }),
            dx);
}

TEST_P(WindowMath, PoolingBackwardGatheredInTheCpusOrderGivesItsBits) {
  const auto [k, stride, pad, channels] = GetParam();
  if (pad) GTEST_SKIP() << "pooling has no padding";
  const Window2d g = geometry(11, 9, channels, k, stride, 0);
  const int64_t rows = 3;
  const auto be = backend::make_cpu_backend(2);
  // Values from a few levels, so windows often hold their maximum twice and the first one must win.
  std::vector<float> x = test::random_floats(static_cast<size_t>(rows * g.in_h * g.in_w * channels), 3);
  for (float& v : x) v = std::round(v * 3.0f);
  std::vector<float> y(static_cast<size_t>(rows * g.out_h * g.out_w * channels));
  const std::vector<float> dy = test::random_floats(y.size(), 5);
  std::vector<float> dx(x.size());
  be->max_pool_forward(g, rows, x.data(), y.data());
  be->max_pool_backward(g, rows, x.data(), y.data(), dy.data(), dx.data());
  EXPECT_EQ(gathered(g, rows, [&](int64_t r, int64_t yy, int64_t xx, int64_t c) {
              return backend::max_pool_backward_value(g, x.data(), y.data(), dy.data(), r, yy, xx, c);
            }),
            dx)
      << "max pooling";
  be->avg_pool_backward(g, rows, dy.data(), dx.data());
  EXPECT_EQ(gathered(g, rows, [&](int64_t r, int64_t yy, int64_t xx, int64_t c) {
              return backend::avg_pool_backward_value(g, dy.data(), r, yy, xx, c);
            }),
            dx)
      << "average pooling";
}

INSTANTIATE_TEST_SUITE_P(Geometries, WindowMath,
                         ::testing::Values(Case{3, 1, 0, 4}, Case{3, 1, 1, 4}, Case{5, 2, 2, 4}, Case{2, 2, 0, 4},
                                           Case{3, 2, 0, 4}, Case{3, 1, 0, 19}, Case{3, 2, 1, 19}));

// A dilated window (Conv1D's and SeparableConv2D's dilation_rate): the gather finds its taps as the
// CPU's scatter places them.
TEST(WindowMath, DilatedCol2imGatheredInTheCpusOrderGivesItsBits) {
  for (const auto& [dh, dw] : {std::pair<int64_t, int64_t>{2, 3}, std::pair<int64_t, int64_t>{1, 2}}) {
    Window2d g = geometry(11, 9, 5, 3, 1, 2);
    g.dilation_h = dh;
    g.dilation_w = dw;
    g.out_h = (g.in_h + 2 * g.pad_top - (g.k_h - 1) * dh - 1) + 1;
    g.out_w = (g.in_w + 2 * g.pad_left - (g.k_w - 1) * dw - 1) + 1;
    const int64_t rows = 2;
    const auto be = backend::make_cpu_backend(2);
    const std::vector<float> col = test::random_floats(static_cast<size_t>(rows * g.out_h * g.out_w * g.patch()), 8);
    std::vector<float> dx(static_cast<size_t>(rows * g.in_h * g.in_w * g.channels));
    be->col2im(g, rows, col.data(), dx.data());
    EXPECT_EQ(gathered(g, rows, [&](int64_t r, int64_t y, int64_t x, int64_t c) {
                return backend::col2im_value(g, col.data(), r, y, x, c);
              }),
              dx);
    // im2col's adjoint: <col, im2col(x)> = <col2im(col), x>.
    const std::vector<float> x = test::random_floats(dx.size(), 9);
    std::vector<float> cols(col.size());
    be->im2col(g, rows, x.data(), cols.data());
    double a = 0, b = 0;
    for (size_t i = 0; i < col.size(); ++i) a += static_cast<double>(col[i]) * cols[i];
    for (size_t i = 0; i < x.size(); ++i) b += static_cast<double>(dx[i]) * x[i];
    EXPECT_NEAR(a, b, 1e-4 * std::fabs(a) + 1e-4);
  }
}

// im2col against its definition (each tap's value, or zero outside the input) and col2im against the
// gather, for ZeroPadding2D's shifts (a 1x1 window, unequal padding on each side, written as whole rows),
// a 1x1 window that crops, and windows over an RGB image's three channels (copied inline).
TEST(WindowMath, ShiftsAndFewChannelsMatchTheDefinition) {
  struct Shape {
    int64_t channels, k, stride, pad_top, pad_left, out_h, out_w;
  };
  const Shape shapes[] = {{5, 1, 1, 0, 0, 12, 10},  {3, 1, 1, 2, 1, 14, 13}, {19, 1, 1, 1, 3, 12, 12},
                          {4, 1, 1, 0, 0, 9, 7},    {3, 3, 2, 1, 1, 6, 5},   {3, 3, 1, 0, 0, 9, 7},
                          {2, 3, 2, 0, 0, 5, 4},    {1, 2, 1, 1, 1, 12, 10}};
  const auto be = backend::make_cpu_backend(2);
  for (const Shape& s : shapes) {
    Window2d g = geometry(11, 9, s.channels, s.k, s.stride, 0);
    g.pad_top = s.pad_top, g.pad_left = s.pad_left, g.out_h = s.out_h, g.out_w = s.out_w;
    SCOPED_TRACE(testing::Message() << "channels " << s.channels << " window " << s.k << " stride " << s.stride
                                    << " pads " << s.pad_top << "," << s.pad_left << " out " << s.out_h << "x" << s.out_w);
    const int64_t rows = 2, C = g.channels;
    const std::vector<float> x = test::random_floats(static_cast<size_t>(rows * g.in_h * g.in_w * C), 4);
    std::vector<float> cols(static_cast<size_t>(rows * g.out_h * g.out_w * g.patch()), -1.0f);
    be->im2col(g, rows, x.data(), cols.data());
    std::vector<float> want;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < g.out_h; ++i)
        for (int64_t j = 0; j < g.out_w; ++j)
          for (int64_t a = 0; a < g.k_h; ++a)
            for (int64_t b = 0; b < g.k_w; ++b)
              for (int64_t c = 0; c < C; ++c) {
                const int64_t y = i * g.stride_h + a - g.pad_top, xx = j * g.stride_w + b - g.pad_left;
                const bool in = y >= 0 && y < g.in_h && xx >= 0 && xx < g.in_w;
                want.push_back(in ? x[static_cast<size_t>(((r * g.in_h + y) * g.in_w + xx) * C + c)] : 0.0f);
              }
    EXPECT_EQ(cols, want) << "im2col";
    const std::vector<float> col = test::random_floats(cols.size(), 6);
    std::vector<float> dx(x.size(), -1.0f);
    be->col2im(g, rows, col.data(), dx.data());
    EXPECT_EQ(gathered(g, rows, [&](int64_t r, int64_t y, int64_t xx, int64_t c) {
                return backend::col2im_value(g, col.data(), r, y, xx, c);
              }),
              dx)
        << "col2im";
  }
}

// UpSampling2D's gradient (a gather of the outputs that read each input) is the adjoint of its forward,
// for both interpolations and factors whose scale is exact and inexact in float32.
TEST(UpsampleMath, BackwardIsTheAdjointOfForward) {
  const auto be = backend::make_cpu_backend(2);
  for (const auto interpolation : {backend::Interpolation::Nearest, backend::Interpolation::Bilinear})
    for (const auto& [sh, sw] : {std::pair<int64_t, int64_t>{2, 2}, std::pair<int64_t, int64_t>{3, 1},
                                 std::pair<int64_t, int64_t>{1, 5}}) {
      const backend::Upsample2d u{5, 4, 3, sh, sw, interpolation};
      const int64_t rows = 2, n_in = rows * u.in_h * u.in_w * u.channels, n_out = n_in * sh * sw;
      const std::vector<float> x = test::random_floats(static_cast<size_t>(n_in), 10);
      const std::vector<float> dy = test::random_floats(static_cast<size_t>(n_out), 11);
      std::vector<float> y(static_cast<size_t>(n_out)), dx(static_cast<size_t>(n_in));
      be->upsample2d_forward(u, rows, x.data(), y.data());
      be->upsample2d_backward(u, rows, dy.data(), dx.data());
      double a = 0, b = 0;
      for (size_t i = 0; i < y.size(); ++i) a += static_cast<double>(dy[i]) * y[i];
      for (size_t i = 0; i < x.size(); ++i) b += static_cast<double>(dx[i]) * x[i];
      EXPECT_NEAR(a, b, 1e-5 * std::fabs(a) + 1e-5) << sh << "x" << sw;
    }
}

// The gather in the reversed order (the CUDA kernel before it was fixed) differs from the CPU's sum:
// the test above can fail, and the order is what it checks.
TEST(WindowMath, TheOrderOfTheSumMatters) {
  const Window2d g = geometry(11, 9, 4, 3, 1, 1);
  const int64_t rows = 3, patch = g.patch();
  const auto be = backend::make_cpu_backend(1);
  const std::vector<float> col = test::random_floats(static_cast<size_t>(rows * g.out_h * g.out_w * patch), 7);
  std::vector<float> dx(static_cast<size_t>(rows * g.in_h * g.in_w * g.channels));
  be->col2im(g, rows, col.data(), dx.data());
  const std::vector<float> reversed = gathered(g, rows, [&](int64_t r, int64_t y, int64_t x, int64_t c) {
    float sum = 0.0f;
    for (int64_t a = 0; a < g.k_h; ++a) {
      const int64_t i = backend::covering_window(y, g.pad_top, a, g.stride_h, g.out_h);
      if (i < 0) continue;
      for (int64_t b = 0; b < g.k_w; ++b) {
        const int64_t j = backend::covering_window(x, g.pad_left, b, g.stride_w, g.out_w);
        if (j >= 0) sum += col[((r * g.out_h + i) * g.out_w + j) * patch + (a * g.k_w + b) * g.channels + c];
      }
    }
    return sum;
  });
  EXPECT_NE(reversed, dx);
}

TEST(ActivationMath, BackwardFormulasAreRoundedStepByStep) {
  // y just below 1, where 1 - y*y cancels: the rounded product and a fused multiply-add differ.
  const float y = 0.99993f, dy = 0.7f;
  const float product = y * y;
  const float rounded = dy * (1.0f - product);
  const float fused = dy * std::fma(-y, y, 1.0f);
  ASSERT_NE(rounded, fused) << "this y does not tell the two apart";
  EXPECT_EQ(backend::tanh_backward(y, dy), rounded);
  EXPECT_EQ(backend::sigmoid_backward(0.3f, dy), (dy * 0.3f) * (1.0f - 0.3f));
  EXPECT_TRUE(std::isnan(backend::tanh_backward(std::nanf(""), dy)));
  EXPECT_EQ(backend::relu_backward(-0.5f, dy), 0.0f);
}

TEST(ActivationMath, TheCpuBackendUsesTheSharedFormulas) {
  const auto be = backend::make_cpu_backend(2);
  const int64_t rows = 9, cols = 37;
  // Outputs that reach |y| = 1 closely, where tanh's backward is most sensitive.
  std::vector<float> y = test::random_floats(static_cast<size_t>(rows * cols), 11, -1.0f, 1.0f);
  for (size_t i = 0; i < y.size(); i += 3) y[i] = std::copysign(1.0f - std::ldexp(static_cast<float>(i % 97), -20), y[i]);
  const std::vector<float> dy = test::random_floats(y.size(), 12);
  std::vector<float> dz(y.size());
  be->activation_backward(Activation::Tanh, rows, cols, y.data(), dy.data(), dz.data());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(dz[i], backend::tanh_backward(y[i], dy[i])) << i;
  be->activation_backward(Activation::Sigmoid, rows, cols, y.data(), dy.data(), dz.data());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(dz[i], backend::sigmoid_backward(y[i], dy[i])) << i;
}

}  // namespace
}  // namespace kx
