#include "backend/cpu/window_kernels.hpp"

#include <algorithm>
#include <cstring>

namespace kx::backend::cpu {

namespace {
// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;
}  // namespace

void im2col(const Window2d& g, int64_t rows, const float* x, float* col, int threads) {
  const int64_t C = g.channels, patch = g.patch(), positions = rows * g.out_h * g.out_w;
  const int nt = positions * patch >= kParallelValues ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t r = p / (g.out_h * g.out_w), i = (p / g.out_w) % g.out_h, j = p % g.out_w;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out = col + p * patch;
    for (int64_t a = 0; a < g.k_h; ++a) {
      const int64_t y = i * g.stride_h + a - g.pad_top;
      for (int64_t b = 0; b < g.k_w; ++b) {
        const int64_t xcol = j * g.stride_w + b - g.pad_left;
        float* dst = out + (a * g.k_w + b) * C;
        // Plain loops, not memcpy: with few channels (1 for grey images) a call per copy dominates.
        if (y < 0 || y >= g.in_h || xcol < 0 || xcol >= g.in_w) {
          for (int64_t c = 0; c < C; ++c) dst[c] = 0.0f;
        } else {
          const float* src = sample + (y * g.in_w + xcol) * C;
          for (int64_t c = 0; c < C; ++c) dst[c] = src[c];
        }
      }
    }
  }
}

void col2im(const Window2d& g, int64_t rows, const float* col, float* dx, int threads) {
  const int64_t C = g.channels, patch = g.patch(), sample_size = g.in_h * g.in_w * C;
  const int nt = rows * g.out_h * g.out_w * patch >= kParallelValues ? threads : 1;
  // One sample per iteration: the patches of a sample overlap, those of different samples do not.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    float* sample = dx + r * sample_size;
    std::memset(sample, 0, static_cast<size_t>(sample_size) * sizeof(float));
    for (int64_t i = 0; i < g.out_h; ++i)
      for (int64_t j = 0; j < g.out_w; ++j) {
        const float* in = col + ((r * g.out_h + i) * g.out_w + j) * patch;
        for (int64_t a = 0; a < g.k_h; ++a) {
          const int64_t y = i * g.stride_h + a - g.pad_top;
          if (y < 0 || y >= g.in_h) continue;
          for (int64_t b = 0; b < g.k_w; ++b) {
            const int64_t xcol = j * g.stride_w + b - g.pad_left;
            if (xcol < 0 || xcol >= g.in_w) continue;
            float* dst = sample + (y * g.in_w + xcol) * C;
            const float* src = in + (a * g.k_w + b) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
          }
        }
      }
  }
}

void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y, int threads) {
  const int64_t C = g.channels, positions = rows * g.out_h * g.out_w;
  const int nt = positions * C * g.k_h * g.k_w >= kParallelValues ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t r = p / (g.out_h * g.out_w), i = (p / g.out_w) % g.out_h, j = p % g.out_w;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out = y + p * C;
    const float* first = sample + (i * g.stride_h * g.in_w + j * g.stride_w) * C;
    std::copy(first, first + C, out);
    for (int64_t a = 0; a < g.k_h; ++a)
      for (int64_t b = 0; b < g.k_w; ++b) {
        const float* in = sample + ((i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * C;
        for (int64_t c = 0; c < C; ++c) out[c] = std::max(out[c], in[c]);
      }
  }
}

void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy, float* dx,
                       int threads) {
  const int64_t C = g.channels, sample_size = g.in_h * g.in_w * C;
  const int nt = rows * sample_size >= kParallelValues ? threads : 1;
  constexpr int64_t kBlock = 64;  // channels handled together, vectorised along the channel axis
  // Windows that tile the input (stride = pool size, Keras's default) touch each input once: they can
  // write dx instead of adding to it, and only the rows and columns no window covers need zeros.
  const bool tiled = g.stride_h == g.k_h && g.stride_w == g.k_w;
  const int64_t covered_h = g.out_h * g.stride_h, covered_w = g.out_w * g.stride_w;
  // One sample per iteration; windows may overlap when the stride is below the pool size.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xs = x + r * sample_size;
    float* dxs = dx + r * sample_size;
    if (!tiled) {
      std::memset(dxs, 0, static_cast<size_t>(sample_size) * sizeof(float));
    } else {
      for (int64_t i = 0; i < g.in_h; ++i) {
        float* row = dxs + i * g.in_w * C;
        if (i >= covered_h)
          std::memset(row, 0, static_cast<size_t>(g.in_w * C) * sizeof(float));
        else if (covered_w < g.in_w)
          std::memset(row + covered_w * C, 0, static_cast<size_t>((g.in_w - covered_w) * C) * sizeof(float));
      }
    }
    for (int64_t i = 0; i < g.out_h; ++i)
      for (int64_t j = 0; j < g.out_w; ++j) {
        const int64_t p = (r * g.out_h + i) * g.out_w + j;
        for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
          const int64_t n = std::min(kBlock, C - c0);
          const float* m = y + p * C + c0;
          float pending[kBlock];  // dy not yet routed: the first maximum in window order takes it
          std::copy(dy + p * C + c0, dy + p * C + c0 + n, pending);
          for (int64_t a = 0; a < g.k_h; ++a)
            for (int64_t b = 0; b < g.k_w; ++b) {
              const int64_t at = ((i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * C + c0;
              const float* __restrict xv = xs + at;
              float* __restrict dv = dxs + at;
              // Branch-free: which position holds the maximum is data, and unpredictable.
              if (tiled) {
#pragma omp simd
                for (int64_t c = 0; c < n; ++c) {
                  const float take = static_cast<float>(xv[c] == m[c]) * pending[c];
                  dv[c] = take;
                  pending[c] -= take;
                }
              } else {
#pragma omp simd
                for (int64_t c = 0; c < n; ++c) {
                  const float take = static_cast<float>(xv[c] == m[c]) * pending[c];
                  dv[c] += take;
                  pending[c] -= take;
                }
              }
            }
        }
      }
  }
}

void avg_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y, int threads) {
  const int64_t C = g.channels, positions = rows * g.out_h * g.out_w;
  const float inv = 1.0f / static_cast<float>(g.k_h * g.k_w);
  const int nt = positions * C * g.k_h * g.k_w >= kParallelValues ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t r = p / (g.out_h * g.out_w), i = (p / g.out_w) % g.out_h, j = p % g.out_w;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out = y + p * C;
    std::fill(out, out + C, 0.0f);
    for (int64_t a = 0; a < g.k_h; ++a)
      for (int64_t b = 0; b < g.k_w; ++b) {
        const float* in = sample + ((i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) out[c] += in[c];
      }
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) out[c] *= inv;
  }
}

void avg_pool_backward(const Window2d& g, int64_t rows, const float* dy, float* dx, int threads) {
  const int64_t C = g.channels, sample_size = g.in_h * g.in_w * C;
  const float inv = 1.0f / static_cast<float>(g.k_h * g.k_w);
  const int nt = rows * sample_size >= kParallelValues ? threads : 1;
  // One sample per iteration: windows of a sample may overlap, those of different samples do not.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    float* dxs = dx + r * sample_size;
    std::memset(dxs, 0, static_cast<size_t>(sample_size) * sizeof(float));
    for (int64_t i = 0; i < g.out_h; ++i)
      for (int64_t j = 0; j < g.out_w; ++j) {
        const float* d = dy + ((r * g.out_h + i) * g.out_w + j) * C;
        for (int64_t a = 0; a < g.k_h; ++a)
          for (int64_t b = 0; b < g.k_w; ++b) {
            float* out = dxs + ((i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) out[c] += d[c] * inv;
          }
      }
  }
}

}  // namespace kx::backend::cpu
