#include "backend/cpu/depthwise_kernels.hpp"

#include <algorithm>
#include <cstring>

#include "backend/cpu/avx2_common.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/prefetch_rows.hpp"
#include "backend/cpu/target_clones.hpp"

namespace kx::backend::cpu {
namespace {

// Below this many output values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;

// Sixteen channels as one value: GCC and clang compile its arithmetic at the vector width of the
// function it is inlined into (one AVX-512 register, two AVX2 ones, four SSE or NEON ones), so a
// block's sum stays in registers across all the taps that feed it.
using Block = float __attribute__((vector_size(64)));
constexpr int64_t kLanes = sizeof(Block) / sizeof(float);
// The most taps a window may have for the blocked kernels, which list a position's taps on the stack.
constexpr int kMaxTaps = 49;

// Offsets (in floats) of the pairs of vectors whose products one value sums, in the order it adds them.
struct TapPairs {
  int n = 0;
  int64_t first[kMaxTaps], second[kMaxTaps];
  void add(int64_t a, int64_t b) {
    first[n] = a;
    second[n] = b;
    ++n;
  }
};

// The start of each block of kLanes channels: whole blocks, the last one ending at the last channel
// (overlapping the one before it when channels is not a multiple of kLanes: it writes there what that
// block wrote, the same sums in the same order).
inline int64_t block_start(int64_t c, int64_t channels) { return std::min(c, channels - kLanes); }

// out[o] += x[o / m] * w[o] for o < channels * m: one tap of one output position. With one filter
// per channel the three arrays run in step and the loop vectorises plainly (the blocked kernels take
// that case from sixteen channels up).
KX_CLONES void tap_forward(int64_t channels, int64_t m, const float* x, const float* w, float* out) {
  if (m == 1) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) out[c] += x[c] * w[c];
    return;
  }
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < m; ++k) out[c * m + k] += x[c] * w[c * m + k];
}

// dx[c] += sum over k of w[c * m + k] * dy[c * m + k]: one tap's share of the input gradient.
KX_CLONES void tap_backward_input(int64_t channels, int64_t m, const float* w, const float* dy, float* dx) {
  if (m == 1) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) dx[c] += w[c] * dy[c];
    return;
  }
  for (int64_t c = 0; c < channels; ++c) {
    float s = 0.0f;
    for (int64_t k = 0; k < m; ++k) s += w[c * m + k] * dy[c * m + k];
    dx[c] += s;
  }
}

// acc[o] += x[o / m] * dy[o] for o < channels * m: one tap's share of one sample's filter gradient.
KX_CLONES void tap_backward_filter(int64_t channels, int64_t m, const float* x, const float* dy, float* acc) {
  if (m == 1) {
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) acc[c] += x[c] * dy[c];
    return;
  }
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < m; ++k) acc[c * m + k] += x[c] * dy[c * m + k];
}

// dw[i] = the sum over samples of partials[r * n + i], in sample order and in double (a short pass:
// no vector clones, which would cost libkx more bytes than they save time).
void sum_sample_partials(int64_t rows, int64_t n, const float* partials, float* dw, int threads) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t first = blk * kBlock, count = std::min(kBlock, n - first);
    double acc[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = partials + r * n + first;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) acc[i] += static_cast<double>(p[i]);
    }
    for (int64_t i = 0; i < count; ++i) dw[first + i] = static_cast<float>(acc[i]);
  }
}

// The input row (or column) of output index i at tap offset a (the tap times the dilation), or -1
// outside the input.
int64_t source(int64_t i, int64_t stride, int64_t a, int64_t pad, int64_t extent) {
  const int64_t v = i * stride + a - pad;
  return v >= 0 && v < extent ? v : -1;
}

// The output index whose tap reads the input at offset t (the input's index plus the padding less the
// tap's offset), or -1 where none does. Strides 1 and 2, nearly every layer's, without a division.
int64_t reader(int64_t t, int64_t stride, int64_t extent) {
  if (t < 0) return -1;
  int64_t i = -1;
  if (stride == 1) i = t;
  else if (stride == 2) i = t % 2 ? -1 : t / 2;
  else if (t % stride == 0) i = t / stride;
  return i < extent ? i : -1;
}

// f(tap, input position) for each tap of output position (i, j) inside the input, in window order.
template <class F>
inline void for_each_tap(const Window2d& g, int64_t i, int64_t j, F f) {
  for (int64_t a = 0; a < g.k_h; ++a) {
    const int64_t yy = source(i, g.stride_h, a * g.dilation_h, g.pad_top, g.in_h);
    if (yy < 0) continue;
    for (int64_t b = 0; b < g.k_w; ++b) {
      const int64_t xx = source(j, g.stride_w, b * g.dilation_w, g.pad_left, g.in_w);
      if (xx >= 0) f(a * g.k_w + b, yy * g.in_w + xx);
    }
  }
}

// Output positions [p0, p1) of y (positions counted over samples, rows and columns): each sums its
// taps in window order.
void forward_positions(const Window2d& g, int64_t m, const float* x, const float* w, const float* bias, float* y,
                       int64_t p0, int64_t p1) {
  const int64_t C = g.channels, O = C * m, per_sample = g.out_h * g.out_w;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t r = p / per_sample, i = p % per_sample / g.out_w, j = p % g.out_w;
    const float* sample = x + r * g.in_h * g.in_w * C;
    float* out = y + p * O;
    std::fill(out, out + O, 0.0f);
    for_each_tap(g, i, j, [&](int64_t tap, int64_t at) { tap_forward(C, m, sample + at * C, w + tap * O, out); });
    if (bias) {
#pragma omp simd
      for (int64_t o = 0; o < O; ++o) out[o] += bias[o];
    }
  }
}

// With one filter per channel, at least kLanes channels and at most kMaxTaps taps: the blocked kernels.
bool by_blocks(const Window2d& g, int64_t m) { return m == 1 && g.channels >= kLanes && g.k_h * g.k_w <= kMaxTaps; }

// Lists site k's pairs of offsets into p and q (sum_listed_products).
using ListTaps = void (*)(const Window2d& g, int64_t site, TapPairs& taps);
void list_forward_taps(const Window2d& g, int64_t k, TapPairs& taps);

// Lists site k's pairs into taps and prefetches the tensor streamed through (x forward, dy for the input
// gradient; the other operand is the filter): the values its last-listed tap reads, about
// kPrefetchAhead values on.
inline void list_site(const Window2d& g, ListTaps list, int64_t k, const float* p, const float* q, TapPairs& taps) {
  list(g, k, taps);
  if (taps.n == 0) return;
  const float* last = list == list_forward_taps ? p + taps.first[taps.n - 1] : q + taps.second[taps.n - 1];
  prefetch_row(last + kPrefetchAhead, g.channels);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// N vectors of 8 channels starting at at[0 .. N) of site k: sum_listed_products's sums, kept in
// registers (GCC keeps the 64-byte Block of an AVX2 clone on the stack). The same products and
// additions in the same order per channel: the same bits.
template <int N>
KX_AVX2_FMA void sum_listed_vectors(const TapPairs& taps, const int64_t* at, const float* p, const float* q,
                                    const float* bias, float* out) {
  __m256 s[N];
#pragma GCC unroll 8
  for (int u = 0; u < N; ++u) s[u] = _mm256_setzero_ps();
  for (int t = 0; t < taps.n; ++t) {
    const float* pt = p + taps.first[t];
    const float* qt = q + taps.second[t];
#pragma GCC unroll 8
    for (int u = 0; u < N; ++u)
      s[u] = _mm256_add_ps(s[u], _mm256_mul_ps(_mm256_loadu_ps(pt + at[u]), _mm256_loadu_ps(qt + at[u])));
  }
#pragma GCC unroll 8
  for (int u = 0; u < N; ++u) {
    if (bias) s[u] = _mm256_add_ps(s[u], _mm256_loadu_ps(bias + at[u]));
    _mm256_storeu_ps(out + at[u], s[u]);
  }
}

// sum_listed_products on CPUs with AVX2 but not AVX-512: eight vectors of 8 channels at a time, the
// last ending at the last channel (overlapping the one before it, with the same sums).
KX_AVX2_FMA void sum_listed_products_avx2(const Window2d& g, ListTaps list, int64_t k0, int64_t k1, const float* p,
                                          const float* q, const float* bias, float* out) {
  constexpr int64_t kWidth = 8;
  const int64_t C = g.channels, vectors = (C + kWidth - 1) / kWidth;
  for (int64_t k = k0; k < k1; ++k) {
    TapPairs taps;
    list_site(g, list, k, p, q, taps);
    float* o = out + k * C;
    for (int64_t v = 0; v < vectors;) {
      const int64_t left = vectors - v, n = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
      int64_t at[8];
      for (int64_t u = 0; u < n; ++u) at[u] = std::min((v + u) * kWidth, C - kWidth);
      if (n == 8) sum_listed_vectors<8>(taps, at, p, q, bias, o);
      else if (n == 4) sum_listed_vectors<4>(taps, at, p, q, bias, o);
      else if (n == 2) sum_listed_vectors<2>(taps, at, p, q, bias, o);
      else sum_listed_vectors<1>(taps, at, p, q, bias, o);
      v += n;
    }
  }
}
#endif

// out[k * channels + c] = 0 + p[first[0] + c] * q[second[0] + c] + ... (+ bias[c]), the pairs listed
// for site k in list order, for sites [k0, k1). Four blocks of channels at a time: four sums in
// registers, each a chain of additions the others overlap. Serves the forward pass and the input
// gradient, which differ only in what they list.
KX_CLONES void sum_listed_products(const Window2d& g, ListTaps list, int64_t k0, int64_t k1, const float* p,
                                   const float* q, const float* bias, float* out) {
  constexpr int64_t kGroup = 4;
  const int64_t C = g.channels;
  for (int64_t k = k0; k < k1; ++k) {
    TapPairs taps;
    list_site(g, list, k, p, q, taps);
    for (int64_t c = 0; c < C; c += kGroup * kLanes) {
      // The group's n blocks: up to four, the last ending at the last channel.
      const int64_t n = std::min(kGroup, (C - c + kLanes - 1) / kLanes);
      int64_t at[kGroup];
      for (int64_t u = 0; u < kGroup; ++u) at[u] = block_start(c + u * kLanes, C);
      Block s[kGroup] = {};
      for (int t = 0; t < taps.n; ++t) {
        const float* pt = p + taps.first[t];
        const float* qt = q + taps.second[t];
#pragma GCC unroll 4
        for (int64_t u = 0; u < kGroup; ++u) {
          if (u == n) break;
          Block a, b;
          std::memcpy(&a, pt + at[u], sizeof a);
          std::memcpy(&b, qt + at[u], sizeof b);
          s[u] += a * b;
        }
      }
#pragma GCC unroll 4
      for (int64_t u = 0; u < n; ++u) {
        if (bias) {
          Block v;
          std::memcpy(&v, bias + at[u], sizeof v);
          s[u] += v;
        }
        std::memcpy(out + k * C + at[u], &s[u], sizeof s[u]);
      }
    }
  }
}

// sum_listed_products or its AVX2 twin: the kernel that suits this CPU, chosen once per call of a pass.
using SumListed = void (*)(const Window2d& g, ListTaps list, int64_t k0, int64_t k1, const float* p, const float* q,
                           const float* bias, float* out);
SumListed sum_listed_kernel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!cpu_has_avx512() && cpu_has_avx2_fma()) return &sum_listed_products_avx2;
#endif
  return &sum_listed_products;
}

// Output position k (over samples, rows and columns): its taps inside the input in window order, as
// (offset into x, offset into w): forward_positions's order, so the same bits.
void list_forward_taps(const Window2d& g, int64_t k, TapPairs& taps) {
  const int64_t C = g.channels, per_sample = g.out_h * g.out_w;
  const int64_t r = k / per_sample, i = k % per_sample / g.out_w, j = k % g.out_w;
  const int64_t sample = r * g.in_h * g.in_w * C;
  for_each_tap(g, i, j, [&](int64_t tap, int64_t at) { taps.add(sample + at * C, tap * C); });
}

// Input position k of one sample: the output positions that read it, as (offset into w, offset into
// the sample's dy), in the order of those positions (a later tap row reads from an earlier output row,
// a later tap column from an earlier column): the order in which backward_positions scatters them, so
// the same bits.
void list_input_gradient_taps(const Window2d& g, int64_t k, TapPairs& taps) {
  const int64_t C = g.channels, yy = k / g.in_w, xx = k % g.in_w;
  for (int64_t a = g.k_h - 1; a >= 0; --a) {
    const int64_t i = reader(yy + g.pad_top - a * g.dilation_h, g.stride_h, g.out_h);
    if (i < 0) continue;
    for (int64_t b = g.k_w - 1; b >= 0; --b) {
      const int64_t j = reader(xx + g.pad_left - b * g.dilation_w, g.stride_w, g.out_w);
      if (j >= 0) taps.add((a * g.k_w + b) * C, (i * g.out_w + j) * C);
    }
  }
}

// acc[c] = acc[c] + x0[c] * dy0[c] + x1[c] * dy1[c]: one tap's share of two output positions' filter
// gradient, in their order, with one load and store of the partial sums for both.
KX_CLONES void tap_pair_backward_filter(int64_t channels, const float* x0, const float* dy0, const float* x1,
                                        const float* dy1, float* acc) {
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) acc[c] = acc[c] + x0[c] * dy0[c] + x1[c] * dy1[c];
}

// One sample's filter-gradient partials with one filter per channel, two neighbouring output
// positions of a row at a time (backward_positions's order of additions: the same bits).
void filter_partials_in_pairs(const Window2d& g, const float* x, const float* dy, float* part) {
  const int64_t C = g.channels;
  std::fill(part, part + g.k_h * g.k_w * C, 0.0f);
  for (int64_t i = 0; i < g.out_h; ++i)
    for (int64_t j = 0; j < g.out_w; j += 2) {
      const bool second = j + 1 < g.out_w;
      const float* d0 = dy + (i * g.out_w + j) * C;
      const float* d1 = d0 + C;
      // Both streams about kPrefetchAhead values on: dy, and x along the window's last row.
      prefetch_row(d0 + kPrefetchAhead, 2 * C);
      const int64_t last_row = std::min(i * g.stride_h + (g.k_h - 1) * g.dilation_h - g.pad_top, g.in_h - 1);
      prefetch_row(x + (std::max<int64_t>(last_row, 0) * g.in_w + j * g.stride_w) * C + kPrefetchAhead, 2 * C);
      for (int64_t a = 0; a < g.k_h; ++a) {
        const int64_t yy = source(i, g.stride_h, a * g.dilation_h, g.pad_top, g.in_h);
        if (yy < 0) continue;
        for (int64_t b = 0; b < g.k_w; ++b) {
          const int64_t x0 = source(j, g.stride_w, b * g.dilation_w, g.pad_left, g.in_w);
          const int64_t x1 = second ? source(j + 1, g.stride_w, b * g.dilation_w, g.pad_left, g.in_w) : -1;
          float* acc = part + (a * g.k_w + b) * C;
          const float* v0 = x0 >= 0 ? x + (yy * g.in_w + x0) * C : nullptr;
          const float* v1 = x1 >= 0 ? x + (yy * g.in_w + x1) * C : nullptr;
          if (v0 && v1) {
            tap_pair_backward_filter(C, v0, d0, v1, d1, acc);
          } else if (v0) {
            tap_backward_filter(C, 1, v0, d0, acc);
          } else if (v1) {
            tap_backward_filter(C, 1, v1, d1, acc);
          }
        }
      }
    }
}

// One sample's dx and filter-gradient partials (either may be null) in one pass over its output
// gradient: each output position scatters its taps into dx and adds them into the partials.
void backward_positions(const Window2d& g, int64_t m, const float* sample, const float* w, const float* dy, float* d,
                        float* part) {
  const int64_t C = g.channels, O = C * m;
  if (d) std::fill(d, d + g.in_h * g.in_w * C, 0.0f);
  if (part) std::fill(part, part + g.k_h * g.k_w * O, 0.0f);
  for (int64_t i = 0; i < g.out_h; ++i)
    for (int64_t j = 0; j < g.out_w; ++j) {
      const float* grad = dy + (i * g.out_w + j) * O;
      for_each_tap(g, i, j, [&](int64_t tap, int64_t at) {
        if (d) tap_backward_input(C, m, w + tap * O, grad, d + at * C);
        if (part) tap_backward_filter(C, m, sample + at * C, grad, part + tap * O);
      });
    }
}

}  // namespace

void depthwise_conv2d_forward(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                              const float* bias, float* y, int threads) {
  depthwise_conv2d_forward_by_ranges(g, m, rows, x, w, bias, y, threads, g.out_w, {});
}

void depthwise_conv2d_forward_by_ranges(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                                        const float* bias, float* y, int threads, int64_t range_positions,
                                        RangeDone range_done) {
  const int64_t positions = rows * g.out_h * g.out_w, ranges = (positions + range_positions - 1) / range_positions;
  if (positions == 0) return;
  write_by_ranges(
      ranges, positions * g.channels * m >= kParallelValues ? threads : 1,
      [&, blocks = by_blocks(g, m), sum_listed = sum_listed_kernel()](int64_t k) {
        const int64_t p0 = k * range_positions, p1 = std::min(positions, p0 + range_positions);
        if (blocks) return sum_listed(g, list_forward_taps, p0, p1, x, w, bias, y);
        forward_positions(g, m, x, w, bias, y, p0, p1);
      },
      range_done);
}

void depthwise_conv2d_backward(const Window2d& g, int64_t m, int64_t rows, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* partials, int threads) {
  const int64_t C = g.channels, O = C * m, in_size = g.in_h * g.in_w * C, out_size = g.out_h * g.out_w * O;
  const int64_t taps = g.k_h * g.k_w;
  if (!dx && !dw) return;
  const int nt = rows * out_size >= kParallelValues ? threads : 1;
  const bool blocks = by_blocks(g, m);
  const SumListed sum_listed = sum_listed_kernel();
  // Sample by sample: dx, and the filter gradient's partials (float32 sums over one sample's
  // positions, as short as a GEMM's over that sample would be). The partials are then summed over the
  // samples in order, in double: no result depends on the thread count.
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const float* sample = x + r * in_size;
    const float* grad = dy + r * out_size;
    float* d = dx ? dx + r * in_size : nullptr;
    float* part = dw ? partials + r * taps * O : nullptr;
    if (!blocks) {
      backward_positions(g, m, sample, w, grad, d, part);
      continue;
    }
    if (d) sum_listed(g, list_input_gradient_taps, 0, g.in_h * g.in_w, w, grad, nullptr, d);
    if (part) filter_partials_in_pairs(g, sample, grad, part);
  }
  if (dw) sum_sample_partials(rows, taps * O, partials, dw, nt);
}

}  // namespace kx::backend::cpu
