// The cases of the 2-D window kernels: im2col / col2im, native convolutions (with their reference from
// other kernels where a backend has none) and pooling.
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_case_setups.hpp"
#include "reference.hpp"

namespace kx::test::ops {

using backend::Backend;
using backend::Op;
using backend::Trans;
using backend::Window2d;

namespace {

constexpr int64_t kRows = 2;  // samples
constexpr int64_t kFilters = 4;

// A 3x3 window dilated 2x3 with padding 2 (Keras's Conv1D/Conv2D dilation_rate).
Window2d dilated_window() {
  Window2d g = make_window(8, 9, 2, 3, 2, 1, 2);
  g.dilation_h = 2;
  g.dilation_w = 3;
  g.out_h = (g.in_h + 2 * g.pad_top - (g.k_h - 1) * g.dilation_h - 1) / g.stride_h + 1;
  g.out_w = (g.in_w + 2 * g.pad_left - (g.k_w - 1) * g.dilation_w - 1) / g.stride_w + 1;
  return g;
}

// A 3x3 window with stride 2 and padding 1 ("same" on a 7x6 input), a 2x3 one with stride 1 and
// none, and a dilated one: convolutions and im2col / col2im.
std::vector<Window2d> conv_windows() {
  return {make_window(7, 6, 3, 3, 3, 2, 1), make_window(5, 6, 2, 2, 3, 1, 0), dilated_window()};
}
// The depthwise convolutions add a 5x5 "same" window over 40 channels: more taps than one pass of the
// CUDA filter gradient sums, channels past one warp's 32, and positions enough to cut into chunks.
std::vector<Window2d> depthwise_windows() {
  std::vector<Window2d> windows = conv_windows();
  windows.push_back(make_window(24, 24, 40, 5, 5, 1, 2));
  return windows;
}
// Pooling has no padding: 2x2 windows with stride 2 that leave a column out, and overlapping 3x2 ones.
std::vector<Window2d> pool_windows() { return {make_window(6, 7, 3, 2, 2, 2, 0), make_window(5, 6, 2, 3, 2, 1, 0)}; }

std::string describe(const Window2d& g) {
  return std::to_string(g.k_h) + "x" + std::to_string(g.k_w) + " stride " + std::to_string(g.stride_h) + " pad " +
         std::to_string(g.pad_top) + " dilation " + std::to_string(g.dilation_h) + "x" + std::to_string(g.dilation_w);
}
size_t input_size(const Window2d& g) { return count(kRows * g.in_h * g.in_w * g.channels); }
size_t output_size(const Window2d& g, int64_t channels) { return count(kRows * g.out_h * g.out_w * channels); }
int64_t positions(const Window2d& g) { return kRows * g.out_h * g.out_w; }

}  // namespace

OpCall setup_im2col(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : conv_windows()) {
    const float* x = io.in(io.random(input_size(g)));
    float* col = io.out("col " + describe(g), count(positions(g) * g.patch()));
    calls.push_back([=](Backend& be) { be.im2col(g, kRows, x, col); });
  }
  return in_order(std::move(calls));
}

OpCall setup_col2im(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : conv_windows()) {
    const float* col = io.in(io.random(count(positions(g) * g.patch())));
    float* dx = io.out("dx " + describe(g), input_size(g));
    calls.push_back([=](Backend& be) { be.col2im(g, kRows, col, dx); });
  }
  return in_order(std::move(calls));
}

// With bias and ReLU on the padded window, with neither on the other. Where the backend has no native
// convolution the reference runs: im2col, then a GEMM with the bias and activation fused.
OpCall setup_conv2d_forward(OpIo& io) {
  std::vector<OpCall> calls;
  bool first = true;
  for (const Window2d& g : conv_windows()) {
    const Activation act = first ? Activation::Relu : Activation::None;
    const float* x = io.in(io.random(input_size(g)));
    const float* w = io.in(io.random(count(g.patch() * kFilters)));
    const float* bias = first ? io.in(io.random(kFilters)) : nullptr;
    float* y = io.out(std::string("y ") + activation_name(act) + (bias ? " with bias " : " ") + describe(g),
                      output_size(g, kFilters));
    first = false;
    if (io.native({Op::conv2d_forward, g})) {
      calls.push_back([=](Backend& be) { be.conv2d_forward(g, kFilters, kRows, x, w, bias, act, y); });
      continue;
    }
    float* col = io.scratch(count(positions(g) * g.patch()));
    calls.push_back([=](Backend& be) {
      be.im2col(g, kRows, x, col);
      be.gemm(Trans::No, Trans::No, positions(g), kFilters, g.patch(), col, g.patch(), w, kFilters, 0.0f, y, kFilters,
              backend::Epilogue{bias, act});
    });
  }
  return in_order(std::move(calls));
}

// dx, dw and db on the padded window, dw and db alone (a first layer) on the other. The reference:
// db the bias gradient of dz, dw = im2col(x)^T dz, dx = col2im(dz w^T).
OpCall setup_conv2d_backward(OpIo& io) {
  std::vector<OpCall> calls;
  bool first = true;
  for (const Window2d& g : conv_windows()) {
    const int64_t patch = g.patch(), n = positions(g);
    const float* x = io.in(io.random(input_size(g)));
    const float* w = io.in(io.random(count(patch * kFilters)));
    const float* dz = io.in(io.random(output_size(g, kFilters)));
    float* dx = first ? io.out("dx " + describe(g), input_size(g)) : nullptr;
    float* dw = io.out("dw " + describe(g), count(patch * kFilters));
    float* db = io.out("db " + describe(g), kFilters);
    first = false;
    if (io.native({Op::conv2d_backward, g})) {
      calls.push_back([=](Backend& be) { be.conv2d_backward(g, kFilters, kRows, x, w, dz, dx, dw, db); });
      continue;
    }
    float* col = io.scratch(count(n * patch));
    float* dcol = dx ? io.scratch(count(n * patch)) : nullptr;
    calls.push_back([=](Backend& be) {
      be.bias_grad(n, kFilters, dz, db);
      be.im2col(g, kRows, x, col);
      be.gemm(Trans::Yes, Trans::No, patch, kFilters, n, col, patch, dz, kFilters, 0.0f, dw, kFilters, {});
      if (!dx) return;
      be.gemm(Trans::No, Trans::Yes, n, patch, kFilters, dz, kFilters, w, kFilters, 0.0f, dcol, patch, {});
      be.col2im(g, kRows, dcol, dx);
    });
  }
  return in_order(std::move(calls));
}

// Depthwise convolutions on each window, one filter per channel with a bias and two without.
OpCall setup_depthwise_conv2d_forward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : depthwise_windows())
    for (const int64_t m : {1, 2}) {
      const float* x = io.in(io.random(input_size(g)));
      const float* w = io.in(io.random(count(g.patch() * m)));
      const float* bias = m == 1 ? io.in(io.random(count(g.channels))) : nullptr;
      float* y = io.out("y " + describe(g) + " multiplier " + std::to_string(m), output_size(g, g.channels * m));
      calls.push_back([=](Backend& be) { be.depthwise_conv2d_forward(g, m, kRows, x, w, bias, y); });
    }
  return in_order(std::move(calls));
}

OpCall setup_depthwise_conv2d_backward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : depthwise_windows())
    for (const int64_t m : {1, 2}) {
      const std::string what = describe(g) + " multiplier " + std::to_string(m);
      const float* x = io.in(io.random(input_size(g)));
      const float* w = io.in(io.random(count(g.patch() * m)));
      const float* dy = io.in(io.random(output_size(g, g.channels * m)));
      // dx gathers in the CPU's tap order with each operation rounded: the same bits.
      float* dx = io.out("dx " + what, input_size(g), Check{.tolerance = 0});
      // The filter gradient sums over every position: the CPU in float32, a GPU in double (see bias_grad's).
      const Check long_sum{.tolerance = positions(g) > 100 ? 1e-4 : -1};
      float* dw = io.out("dw " + what, count(g.patch() * m), long_sum);
      calls.push_back([=](Backend& be) { be.depthwise_conv2d_backward(g, m, kRows, x, w, dy, dx, dw); });
    }
  return in_order(std::move(calls));
}

OpCall setup_max_pool_forward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : pool_windows()) {
    const float* x = io.in(io.random(input_size(g)));
    float* y = io.out("y " + describe(g), output_size(g, g.channels));
    calls.push_back([=](Backend& be) { be.max_pool_forward(g, kRows, x, y); });
  }
  return in_order(std::move(calls));
}

// y is the forward's (computed here); x in quarters on the overlapping windows, so that windows hold
// their maximum more than once and the first position must take dy.
OpCall setup_max_pool_backward(OpIo& io) {
  std::vector<OpCall> calls;
  bool first = true;
  for (const Window2d& g : pool_windows()) {
    std::vector<float> xs = io.random(input_size(g));
    if (!first)
      for (float& v : xs) v = std::round(v * 4) / 4;
    first = false;
    const Vec pooled = pool2d_reference(Vec(xs.begin(), xs.end()), kRows, g.in_h, g.in_w, g.channels, g.k_h, g.k_w,
                                        g.stride_h, g.stride_w, true);
    const float* x = io.in(xs);
    const float* y = io.in(std::vector<float>(pooled.begin(), pooled.end()));
    const float* dy = io.in(io.random(output_size(g, g.channels)));
    float* dx = io.out("dx " + describe(g), input_size(g));
    calls.push_back([=](Backend& be) { be.max_pool_backward(g, kRows, x, y, dy, dx); });
  }
  return in_order(std::move(calls));
}

OpCall setup_avg_pool_forward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : pool_windows()) {
    const float* x = io.in(io.random(input_size(g)));
    float* y = io.out("y " + describe(g), output_size(g, g.channels));
    calls.push_back([=](Backend& be) { be.avg_pool_forward(g, kRows, x, y); });
  }
  return in_order(std::move(calls));
}

OpCall setup_avg_pool_backward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const Window2d& g : pool_windows()) {
    const float* dy = io.in(io.random(output_size(g, g.channels)));
    float* dx = io.out("dx " + describe(g), input_size(g));
    calls.push_back([=](Backend& be) { be.avg_pool_backward(g, kRows, dy, dx); });
  }
  return in_order(std::move(calls));
}

namespace {
// Both interpolations, by 2x3 and by 3x1 (a factor whose scale 1/3 is inexact in float32).
std::vector<backend::Upsample2d> upsamplings() {
  std::vector<backend::Upsample2d> all;
  for (const auto interpolation : {backend::Interpolation::Nearest, backend::Interpolation::Bilinear})
    for (const auto& [sh, sw] : {std::pair<int64_t, int64_t>{2, 3}, std::pair<int64_t, int64_t>{3, 1}})
      all.push_back({4, 5, 3, sh, sw, interpolation});
  return all;
}
std::string describe(const backend::Upsample2d& u) {
  return std::string(u.interpolation == backend::Interpolation::Nearest ? "nearest " : "bilinear ") +
         std::to_string(u.size_h) + "x" + std::to_string(u.size_w);
}
size_t upsampled_size(const backend::Upsample2d& u) {
  return count(kRows * u.in_h * u.size_h * u.in_w * u.size_w * u.channels);
}
}  // namespace

OpCall setup_upsample2d_forward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const backend::Upsample2d& u : upsamplings()) {
    const float* x = io.in(io.random(count(kRows * u.in_h * u.in_w * u.channels)));
    float* y = io.out("y " + describe(u), upsampled_size(u));
    calls.push_back([=](Backend& be) { be.upsample2d_forward(u, kRows, x, y); });
  }
  return in_order(std::move(calls));
}

OpCall setup_upsample2d_backward(OpIo& io) {
  std::vector<OpCall> calls;
  for (const backend::Upsample2d& u : upsamplings()) {
    const float* dy = io.in(io.random(upsampled_size(u)));
    float* dx = io.out("dx " + describe(u), count(kRows * u.in_h * u.in_w * u.channels));
    calls.push_back([=](Backend& be) { be.upsample2d_backward(u, kRows, dy, dx); });
  }
  return in_order(std::move(calls));
}

}  // namespace kx::test::ops
