// The CPU's depthwise convolution with one filter per channel and at least sixteen channels runs
// blocked kernels (sums held in registers across taps and positions); fewer channels run the plain
// per-tap loops. Each channel's values depend on that channel alone, so every channel of a blocked run
// must equal, bit for bit, the same channel convolved on its own by the plain loops: forward, input
// gradient and filter gradient, over windows with strides, padding, dilation, a channel count that is
// no multiple of sixteen, and windows wider than the filter gradient's register blocks.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Window2d;

struct Geometry {
  int64_t in_h, in_w, channels, k_h, k_w, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
};

Window2d window(const Geometry& c, int64_t channels) {
  Window2d g;
  g.in_h = c.in_h;
  g.in_w = c.in_w;
  g.channels = channels;
  g.k_h = c.k_h;
  g.k_w = c.k_w;
  g.stride_h = c.stride_h;
  g.stride_w = c.stride_w;
  g.pad_top = c.pad_top;
  g.pad_left = c.pad_left;
  g.dilation_h = c.dilation_h;
  g.dilation_w = c.dilation_w;
  g.out_h = (c.in_h + 2 * c.pad_top - (c.k_h - 1) * c.dilation_h - 1) / c.stride_h + 1;
  g.out_w = (c.in_w + 2 * c.pad_left - (c.k_w - 1) * c.dilation_w - 1) / c.stride_w + 1;
  return g;
}

// What one forward and backward call give: y, dx, dw.
struct Results {
  std::vector<float> y, dx, dw;
};

Results run(backend::Backend& be, const Window2d& g, int64_t rows, const std::vector<float>& x,
        const std::vector<float>& w, const std::vector<float>& bias, const std::vector<float>& dy) {
  Results r;
  r.y.assign(static_cast<size_t>(rows * g.out_h * g.out_w * g.channels), -3.0f);
  r.dx.assign(x.size(), -3.0f);
  r.dw.assign(w.size(), -3.0f);
  be.depthwise_conv2d_forward(g, 1, rows, x.data(), w.data(), bias.data(), r.y.data());
  be.depthwise_conv2d_backward(g, 1, rows, x.data(), w.data(), dy.data(), r.dx.data(), r.dw.data());
  return r;
}

// Channel c of channels-last values with `channels` channels.
std::vector<float> channel(const std::vector<float>& v, int64_t channels, int64_t c) {
  std::vector<float> out;
  for (size_t i = static_cast<size_t>(c); i < v.size(); i += static_cast<size_t>(channels)) out.push_back(v[i]);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DepthwiseKernels, EachChannelOfABlockedRunEqualsThatChannelAloneBitForBit) {
  const Geometry cases[] = {
      {9, 8, 20, 3, 3, 1, 1, 1, 1, 1, 1},    // "same", a block and an overlapping last one
      {12, 11, 32, 3, 3, 2, 2, 0, 1, 1, 1},  // downsampling, two whole blocks
      {11, 10, 40, 5, 5, 2, 2, 2, 2, 1, 1},  // EfficientNet's 5x5, strided
      {10, 9, 16, 3, 3, 1, 1, 2, 2, 2, 2},   // dilated, exactly one block
      {8, 13, 17, 2, 5, 1, 2, 0, 2, 1, 1},   // strided along the row only
      {9, 9, 24, 7, 7, 1, 1, 3, 3, 1, 1},    // wider than the filter gradient's register blocks
  };
  const auto be = backend::make_cpu_backend(2);
  const int64_t rows = 3;
  for (const Geometry& c : cases) {
    const Window2d g = window(c, c.channels);
    const std::string what = std::to_string(c.k_h) + "x" + std::to_string(c.k_w) + " over " +
                             std::to_string(c.channels) + " channels, stride " + std::to_string(c.stride_w);
    const int64_t C = c.channels;
    const std::vector<float> x = test::random_floats(static_cast<size_t>(rows * c.in_h * c.in_w * C), 1);
    const std::vector<float> w = test::random_floats(static_cast<size_t>(c.k_h * c.k_w * C), 2);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(C), 3);
    const std::vector<float> dy = test::random_floats(static_cast<size_t>(rows * g.out_h * g.out_w * C), 4);
    const Results all = run(*be, g, rows, x, w, bias, dy);
    for (int64_t k = 0; k < C; ++k) {
      const Results one = run(*be, window(c, 1), rows, channel(x, C, k), channel(w, C, k), channel(bias, C, k),
                          channel(dy, C, k));
      EXPECT_TRUE(same_bits(channel(all.y, C, k), one.y)) << what << ", channel " << k << ": y";
      EXPECT_TRUE(same_bits(channel(all.dx, C, k), one.dx)) << what << ", channel " << k << ": dx";
      EXPECT_TRUE(same_bits(channel(all.dw, C, k), one.dw)) << what << ", channel " << k << ": dw";
    }
    // Every value written: none is left at what the buffers were filled with.
    for (const std::vector<float>* v : {&all.y, &all.dx, &all.dw})
      for (const float f : *v) ASSERT_NE(f, -3.0f) << what;
  }
}

}  // namespace
}  // namespace kx
