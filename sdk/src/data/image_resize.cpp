#include "data/image_resize.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kx::data {
namespace {

// For each output coordinate: the two source coordinates and the weight of the upper one.
struct Taps {
  std::vector<int64_t> lower, upper;
  std::vector<float> lerp;
};

Taps taps(int64_t in, int64_t out) {
  Taps t;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    const float src = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    const float floor_src = std::floor(src);
    t.lower.push_back(std::clamp<int64_t>(static_cast<int64_t>(floor_src), 0, in - 1));
    t.upper.push_back(std::clamp<int64_t>(static_cast<int64_t>(std::ceil(src)), 0, in - 1));
    t.lerp.push_back(src - floor_src);
  }
  return t;
}

}  // namespace

void resize_bilinear(const Image& img, int64_t out_h, int64_t out_w, float scale, float* out) {
  const int64_t c = img.channels;
  const Taps ys = taps(img.height, out_h), xs = taps(img.width, out_w);
  const uint8_t* p = img.pixels.data();
  auto at = [&](int64_t y, int64_t x, int64_t k) { return static_cast<float>(p[(y * img.width + x) * c + k]); };
  for (int64_t y = 0; y < out_h; ++y) {
    const int64_t y0 = ys.lower[y], y1 = ys.upper[y];
    const float fy = ys.lerp[y];
    for (int64_t x = 0; x < out_w; ++x) {
      const int64_t x0 = xs.lower[x], x1 = xs.upper[x];
      const float fx = xs.lerp[x];
      for (int64_t k = 0; k < c; ++k) {
        const float top = at(y0, x0, k) + (at(y0, x1, k) - at(y0, x0, k)) * fx;
        const float bottom = at(y1, x0, k) + (at(y1, x1, k) - at(y1, x0, k)) * fx;
        out[(y * out_w + x) * c + k] = (top + (bottom - top) * fy) * scale;
      }
    }
  }
}

}  // namespace kx::data
