#include "backend/cpu/upsample_kernels.hpp"

#include <algorithm>

#include "backend/resize_math.hpp"

namespace kx::backend::cpu {
namespace {
// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;
}  // namespace

void upsample2d_forward(const Upsample2d& u, int64_t rows, const float* x, float* y, int threads) {
  const int64_t C = u.channels, out_h = u.in_h * u.size_h, out_w = u.in_w * u.size_w, lines = rows * out_h;
  const int nt = lines * out_w * C >= kParallelValues ? threads : 1;
  // One output row of one sample per iteration.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t r = line / out_h, oy = line % out_h;
    float* out = y + line * out_w * C;
    if (u.interpolation == Interpolation::Nearest) {
      // Each input pixel's channels copied size_w times along the row.
      const float* in = x + (r * u.in_h + oy / u.size_h) * u.in_w * C;
      for (int64_t ix = 0; ix < u.in_w; ++ix)
        for (int64_t b = 0; b < u.size_w; ++b) std::copy(in + ix * C, in + (ix + 1) * C, out + (ix * u.size_w + b) * C);
      continue;
    }
    for (int64_t ox = 0; ox < out_w; ++ox)
      for (int64_t c = 0; c < C; ++c) out[ox * C + c] = bilinear_value(u, x, r, oy, ox, c);
  }
}

void upsample2d_backward(const Upsample2d& u, int64_t rows, const float* dy, float* dx, int threads) {
  const int64_t C = u.channels, lines = rows * u.in_h;
  const int nt = lines * u.in_w * C * u.size_h * u.size_w >= kParallelValues ? threads : 1;
  // One input row of one sample per iteration, each value gathering what reached it.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t r = line / u.in_h, y = line % u.in_h;
    float* out = dx + line * u.in_w * C;
    for (int64_t x = 0; x < u.in_w; ++x)
      for (int64_t c = 0; c < C; ++c)
        out[x * C + c] = u.interpolation == Interpolation::Nearest ? nearest_input_grad(u, dy, r, y, x, c)
                                                                   : bilinear_input_grad(u, dy, r, y, x, c);
  }
}

}  // namespace kx::backend::cpu
