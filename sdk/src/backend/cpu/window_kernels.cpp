#include "backend/cpu/window_kernels.hpp"

#include <algorithm>
#include <cstring>

namespace kx::backend::cpu {

namespace {
// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;

// The output columns j of one window tap whose input column j * stride + tap - pad lies inside the
// input: [lo, hi), empty when none does.
struct ColumnRange {
  int64_t lo, hi;
};
ColumnRange inside_columns(const Window2d& g, int64_t tap) {
  const int64_t first = g.pad_left - tap;  // j * stride >= first
  const int64_t last = g.in_w - 1 + g.pad_left - tap;  // j * stride <= last
  if (last < 0) return {0, 0};
  const int64_t lo = first > 0 ? (first + g.stride_w - 1) / g.stride_w : 0;
  const int64_t hi = std::min(g.out_w, last / g.stride_w + 1);
  return {std::min(lo, hi), hi};
}

// dst[0, C) = src[0, C). A window's few channels (an RGB image's three) are copied inline: through
// memmove, a call per output position cost more than the copy.
void copy_channels(const float* src, int64_t C, float* dst) {
  switch (C) {
    case 1: dst[0] = src[0]; return;
    case 2: dst[0] = src[0], dst[1] = src[1]; return;
    case 3: dst[0] = src[0], dst[1] = src[1], dst[2] = src[2]; return;
    case 4: dst[0] = src[0], dst[1] = src[1], dst[2] = src[2], dst[3] = src[3]; return;
    default: std::memcpy(dst, src, static_cast<size_t>(C) * sizeof(float));
  }
}

// A 1x1 window moved by one: each output position reads one input position (a shift by the padding,
// ZeroPadding2D's case), so each input position's gradient comes from at most one output position.
bool single_tap_unit_stride(const Window2d& g) {
  return g.k_h == 1 && g.k_w == 1 && g.stride_h == 1 && g.stride_w == 1;
}

}  // namespace

void im2col(const Window2d& g, int64_t rows, const float* x, float* col, int threads) {
  const int64_t C = g.channels, patch = g.patch(), lines = rows * g.out_h;
  const int nt = lines * g.out_w * patch >= kParallelValues ? threads : 1;
  // One output row of one sample per iteration, one window tap at a time: the input columns a tap
  // reads are a contiguous range, so the loops carry no bounds tests (which cost more than the copy
  // itself when there are few channels, as for grey images).
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t r = line / g.out_h, i = line % g.out_h;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out = col + line * g.out_w * patch;
    for (int64_t a = 0; a < g.k_h; ++a) {
      const int64_t y = i * g.stride_h + a * g.dilation_h - g.pad_top;
      const bool row_inside = y >= 0 && y < g.in_h;
      for (int64_t b = 0; b < g.k_w; ++b) {
        float* dst = out + (a * g.k_w + b) * C;
        const ColumnRange in = row_inside ? inside_columns(g, b * g.dilation_w) : ColumnRange{0, 0};
        for (int64_t j = 0; j < in.lo; ++j) std::fill(dst + j * patch, dst + j * patch + C, 0.0f);
        for (int64_t j = in.hi; j < g.out_w; ++j) std::fill(dst + j * patch, dst + j * patch + C, 0.0f);
        if (in.lo == in.hi) continue;
        const float* src = sample + (y * g.in_w + in.lo * g.stride_w + b * g.dilation_w - g.pad_left) * C;
        const int64_t step = g.stride_w * C;
        if (patch == step) {  // one tap moved by one: the row's inside part is one block
          std::memcpy(dst + in.lo * patch, src, static_cast<size_t>((in.hi - in.lo) * C) * sizeof(float));
        } else {
          for (int64_t j = in.lo; j < in.hi; ++j, src += step) copy_channels(src, C, dst + j * patch);
        }
      }
    }
  }
}

void col2im(const Window2d& g, int64_t rows, const float* col, float* dx, int threads) {
  const int64_t C = g.channels, patch = g.patch(), sample_size = g.in_h * g.in_w * C;
  const int nt = rows * g.out_h * g.out_w * patch >= kParallelValues ? threads : 1;
  if (single_tap_unit_stride(g)) {
    // Each row of dx is the part of one output row inside it, or zeros: written once, not zeroed and
    // then added into.
    const int64_t lines = rows * g.in_h;
    // Output columns j = x + pad_left for input columns x in [x0, x1).
    const int64_t x0 = std::min(g.in_w, std::max<int64_t>(0, -g.pad_left));
    const int64_t x1 = std::max(x0, std::min(g.in_w, g.out_w - g.pad_left));
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t line = 0; line < lines; ++line) {
      const int64_t r = line / g.in_h, y = line % g.in_h, i = y + g.pad_top;
      float* dst = dx + line * g.in_w * C;
      if (i < 0 || i >= g.out_h || x0 == x1) {
        std::fill(dst, dst + g.in_w * C, 0.0f);
        continue;
      }
      std::fill(dst, dst + x0 * C, 0.0f);
      std::memcpy(dst + x0 * C, col + ((r * g.out_h + i) * g.out_w + x0 + g.pad_left) * C,
                  static_cast<size_t>((x1 - x0) * C) * sizeof(float));
      std::fill(dst + x1 * C, dst + g.in_w * C, 0.0f);
    }
    return;
  }
  // One sample per iteration: the patches of a sample overlap, those of different samples do not.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    float* sample = dx + r * sample_size;
    std::memset(sample, 0, static_cast<size_t>(sample_size) * sizeof(float));
    for (int64_t i = 0; i < g.out_h; ++i) {
      const float* line = col + (r * g.out_h + i) * g.out_w * patch;
      for (int64_t a = 0; a < g.k_h; ++a) {
        const int64_t y = i * g.stride_h + a * g.dilation_h - g.pad_top;
        if (y < 0 || y >= g.in_h) continue;
        for (int64_t b = 0; b < g.k_w; ++b) {
          const ColumnRange in = inside_columns(g, b * g.dilation_w);
          if (in.lo == in.hi) continue;
          const float* src = line + (a * g.k_w + b) * C;
          float* dst = sample + (y * g.in_w + in.lo * g.stride_w + b * g.dilation_w - g.pad_left) * C;
          const int64_t step = g.stride_w * C;
          for (int64_t j = in.lo; j < in.hi; ++j, dst += step) {
            const float* s = src + j * patch;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) dst[c] += s[c];
          }
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
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) out[c] = std::max(out[c], in[c]);
      }
  }
}

namespace {

constexpr int64_t kPoolLanes = 16;  // channels per step: one AVX-512 vector, four NEON ones

// Routes one window's dy to the first position (in window order) holding the maximum, for n channels
// from c0 (n < kPoolLanes); Lanes = kPoolLanes fixes n at compile time, so the loops become whole vectors.
template <int64_t Lanes, bool Tiled>
void route_window_max(const Window2d& g, int64_t n, int64_t i, int64_t j, int64_t c0, const float* xs,
                      const float* m, const float* d, float* dxs) {
  if constexpr (Lanes > 0) n = Lanes;
  float left[kPoolLanes];  // dy not yet routed
  for (int64_t c = 0; c < n; ++c) left[c] = d[c];
  for (int64_t a = 0; a < g.k_h; ++a)
    for (int64_t b = 0; b < g.k_w; ++b) {
      const int64_t at = ((i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * g.channels + c0;
      const float* __restrict xv = xs + at;
      float* __restrict dv = dxs + at;
      // Branch-free: which position holds the maximum is data, and unpredictable.
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) {
        const float take = static_cast<float>(xv[c] == m[c]) * left[c];
        if constexpr (Tiled)
          dv[c] = take;
        else
          dv[c] += take;
        left[c] -= take;
      }
    }
}

template <bool Tiled>
void route_sample_max(const Window2d& g, int64_t r, const float* xs, const float* y, const float* dy, float* dxs) {
  const int64_t C = g.channels;
  for (int64_t i = 0; i < g.out_h; ++i)
    for (int64_t j = 0; j < g.out_w; ++j) {
      const int64_t p = ((r * g.out_h + i) * g.out_w + j) * C;
      int64_t c0 = 0;
      for (; c0 + kPoolLanes <= C; c0 += kPoolLanes)
        route_window_max<kPoolLanes, Tiled>(g, kPoolLanes, i, j, c0, xs, y + p + c0, dy + p + c0, dxs);
      if (c0 < C) route_window_max<0, Tiled>(g, C - c0, i, j, c0, xs, y + p + c0, dy + p + c0, dxs);
    }
}

}  // namespace

void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy, float* dx,
                       int threads) {
  const int64_t C = g.channels, sample_size = g.in_h * g.in_w * C;
  const int nt = rows * sample_size >= kParallelValues ? threads : 1;
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
      route_sample_max<false>(g, r, xs, y, dy, dxs);
      continue;
    }
    for (int64_t i = 0; i < g.in_h; ++i) {
      float* row = dxs + i * g.in_w * C;
      if (i >= covered_h)
        std::memset(row, 0, static_cast<size_t>(g.in_w * C) * sizeof(float));
      else if (covered_w < g.in_w)
        std::memset(row + covered_w * C, 0, static_cast<size_t>((g.in_w - covered_w) * C) * sizeof(float));
    }
    route_sample_max<true>(g, r, xs, y, dy, dxs);
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
  // Windows that tile the input (global pooling's one window among them) give each input value one
  // share: written once, as the sum from zero below would be (0 + share), with no zeroing pass first.
  const bool tiles = g.stride_h == g.k_h && g.stride_w == g.k_w && g.out_h * g.k_h == g.in_h &&
                     g.out_w * g.k_w == g.in_w && g.pad_top == 0 && g.pad_left == 0;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    float* dxs = dx + r * sample_size;
    if (!tiles) std::memset(dxs, 0, static_cast<size_t>(sample_size) * sizeof(float));
    for (int64_t i = 0; i < g.out_h; ++i)
      for (int64_t j = 0; j < g.out_w; ++j) {
        const float* d = dy + ((r * g.out_h + i) * g.out_w + j) * C;
        for (int64_t a = 0; a < g.k_h; ++a)
          for (int64_t b = 0; b < g.k_w; ++b) {
            float* out = dxs + ((i * g.stride_h + a) * g.in_w + j * g.stride_w + b) * C;
            if (tiles) {
#pragma omp simd
              for (int64_t c = 0; c < C; ++c) out[c] = 0.0f + d[c] * inv;
            } else {
#pragma omp simd
              for (int64_t c = 0; c < C; ++c) out[c] += d[c] * inv;
            }
          }
      }
  }
}

}  // namespace kx::backend::cpu
