#include "backend/cpu/normalization_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation_kernels.hpp"
#include "backend/cpu/avx512_common.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/prefetch_rows.hpp"
#include "backend/cpu/target_clones.hpp"
#include "backend/layer_norm_math.hpp"

namespace kx::backend::cpu {

namespace {

// Values per partial sum (whole rows): chunks of rows small enough that the narrow activations of a
// batch's last layers still split evenly between threads (rows of 512 left MobileNet's 6x6 and 3x3
// normalisations to one thread of two). Derived from the shape, not the thread count: the partials, and
// so the result, are the same however many threads run.
constexpr int64_t kChunkValues = 1 << 14;
constexpr int64_t kParallelValues = 1 << 15;

}  // namespace

// Whole register tiles of a GEMM's rows (8), so that a GEMM writing the rows chunk by chunk
// (gemm_by_row_ranges) computes no partial tiles.
int64_t chunk_rows(int64_t cols) { return std::max<int64_t>(8, kChunkValues / std::max<int64_t>(cols, 1) / 8 * 8); }

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no such warning, and warns about the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_cvtps_pd
#endif
// The moments of 16 columns at a time, down the rows, their sums held in registers (as the loop below
// computes them: the same operations, no fused multiply-add). Returns the columns it summed.
KX_AVX512 int64_t sum_shifted_columns_avx512(int64_t r0, int64_t r1, int64_t cols, const float* x, double* p,
                                             double* q) {
  const float* shift = x;
  int64_t c0 = 0;
  for (; c0 + 16 <= cols; c0 += 16) {
    const __m512d s0 = _mm512_cvtps_pd(_mm256_loadu_ps(shift + c0)), s1 = _mm512_cvtps_pd(_mm256_loadu_ps(shift + c0 + 8));
    __m512d a0 = _mm512_loadu_pd(p + c0), a1 = _mm512_loadu_pd(p + c0 + 8);
    __m512d b0 = _mm512_loadu_pd(q + c0), b1 = _mm512_loadu_pd(q + c0 + 8);
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * cols + c0;
      const __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(xr)), s0);
      const __m512d d1 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(xr + 8)), s1);
      a0 = _mm512_add_pd(a0, d0);
      a1 = _mm512_add_pd(a1, d1);
      b0 = _mm512_add_pd(b0, _mm512_mul_pd(d0, d0));
      b1 = _mm512_add_pd(b1, _mm512_mul_pd(d1, d1));
    }
    _mm512_storeu_pd(p + c0, a0);
    _mm512_storeu_pd(p + c0 + 8, a1);
    _mm512_storeu_pd(q + c0, b0);
    _mm512_storeu_pd(q + c0 + 8, b1);
  }
  return c0;
}
#pragma GCC diagnostic pop
#else
int64_t sum_shifted_columns_avx512(int64_t, int64_t, int64_t, const float*, double*, double*) { return 0; }
#endif

// p[c] += x - shift, p[cols + c] += (x - shift)^2 for rows [r0, r1) of x: the moments in one pass. The
// shift is the column's first value (x's row 0), so E[d^2] - E[d]^2 does not cancel as E[x^2] - E[x]^2
// does far from zero: a value of the column lies within sqrt(n) spreads of its mean, so at most log2(n)
// of the 29 bits that double has beyond float are lost to the difference. Down 16 columns at a time with
// AVX-512, else 8 (two AVX2 registers of double per sum), the last columns row by row: storing the sums
// after every row bounds the loop by stores once its rows are in cache (a kernel that writes x sums
// each chunk it has just written). The same operations in the same order per column: the same bits.
KX_CLONES_AVX2 void sum_shifted_moments(bool avx512, int64_t r0, int64_t r1, int64_t cols, const float* x, double* p) {
  double* q = p + cols;
  const float* shift = x;
  int64_t c0 = avx512 ? sum_shifted_columns_avx512(r0, r1, cols, x, p, q) : 0;
  constexpr int64_t kWidth = 8;
  for (; c0 + kWidth <= cols; c0 += kWidth) {
    double s[kWidth], a[kWidth], b[kWidth];
    for (int64_t i = 0; i < kWidth; ++i) {
      s[i] = shift[c0 + i];
      a[i] = p[c0 + i];
      b[i] = q[c0 + i];
    }
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * cols + c0;
#pragma omp simd
      for (int64_t i = 0; i < kWidth; ++i) {
        const double d = static_cast<double>(xr[i]) - s[i];
        a[i] += d;
        b[i] += d * d;
      }
    }
    for (int64_t i = 0; i < kWidth; ++i) {
      p[c0 + i] = a[i];
      q[c0 + i] = b[i];
    }
  }
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
#pragma omp simd
    for (int64_t c = c0; c < cols; ++c) {
      const double d = static_cast<double>(xr[c]) - static_cast<double>(shift[c]);
      p[c] += d;
      q[c] += d * d;
    }
  }
}
// Activations fused into batch normalisation's loops row by row (MobileNetV2's and ResNet's): their
// value or gradient costs a compare or two, so it is formed in the same pass over memory as the
// normalisation. The others take a second pass over each block while it is in cache. One loop serves
// relu and relu6 (and no activation) as a clip to [low, high]: a loop per activation in each CPU clone
// would cost libkx more bytes than its budget leaves.
bool fused_in_rows(Activation act) { return act == Activation::Relu || act == Activation::Relu6; }
struct RowClip {
  float low = -INFINITY, high = INFINITY;  // None: no clip
  bool clips_high = false;
};
RowClip row_clip(Activation act) {
  if (act == Activation::Relu) return {0.0f, INFINITY, false};
  if (act == Activation::Relu6) return {0.0f, 6.0f, true};
  return {};
}

// p[c] += dy, p[cols + c] += dy * xhat: batch normalisation's dbeta and dgamma. With `act` relu or relu6
// (its clip), each row of dy first becomes the gradient at the activation's input, where forward's
// value x * scale + shift lies strictly inside the clip (as relu_general_backward and relu's gradient
// pass it); with no activation scale and shift are not read.
KX_CLONES_AVX2 void sum_batch_norm_grads(const RowClip* act, int64_t r0, int64_t r1, int64_t cols, const float* x,
                                         float* dy, const float* scale, const float* shift, const float* mean,
                                         const double* invstd, double* p) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float* gr = dy + r * cols;
    prefetch_row(xr + prefetch_offset(cols), cols);
    prefetch_row(gr + prefetch_offset(cols), cols);
    if (act) {
      const float low = act->low, high = act->high;
      const bool clips = act->clips_high;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        const float v = xr[c] * scale[c] + shift[c];
        gr[c] = (v > low) & ((v < high) | !clips) ? gr[c] : 0.0f;
      }
    }
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const double g = gr[c];
      p[c] += g;
      p[cols + c] += g * static_cast<double>(xr[c] - mean[c]) * invstd[c];
    }
  }
}

// The chunks' partial sums (each `width` values, chunk after chunk) added in chunk order.
std::vector<double> add_chunks_in_order(const std::vector<double>& partial, int64_t chunks, int64_t width) {
  std::vector<double> sums(static_cast<size_t>(width), 0.0);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t i = 0; i < width; ++i) sums[static_cast<size_t>(i)] += partial[static_cast<size_t>(k * width + i)];
  return sums;
}

// K column sums of `cols` columns, in double: add_chunk(r0, r1, p) adds rows [r0, r1) into its chunk's
// partials p (K * cols), then the chunks are added in order.
template <int K, class AddChunk>
std::vector<double> column_sums(int64_t rows, int64_t cols, int threads, AddChunk add_chunk) {
  const int64_t per_chunk = chunk_rows(cols), chunks = (rows + per_chunk - 1) / per_chunk;
  std::vector<double> partial(static_cast<size_t>(chunks * K * cols), 0.0);
  const int nt = rows * cols >= kParallelValues ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t k = 0; k < chunks; ++k)
    add_chunk(k * per_chunk, std::min(rows, (k + 1) * per_chunk), partial.data() + k * K * cols);
  return add_chunks_in_order(partial, chunks, K * cols);
}

}  // namespace

ColumnMomentSums::ColumnMomentSums(int64_t rows, int64_t cols, const float* x)
    : rows_(rows), cols_(cols), chunk_rows_(cpu::chunk_rows(cols)), x_(x), avx512_(cpu_has_avx512()),
      partial_(static_cast<size_t>(chunks() * 2 * cols), 0.0) {}

void ColumnMomentSums::add_chunk(int64_t k) {
  sum_shifted_moments(avx512_, k * chunk_rows_, std::min(rows_, (k + 1) * chunk_rows_), cols_, x_,
                      partial_.data() + k * 2 * cols_);
}

void ColumnMomentSums::finish(float* mean, float* var) const {
  const size_t C = static_cast<size_t>(cols_);
  const std::vector<double> s = add_chunks_in_order(partial_, chunks(), 2 * cols_);
  const double n = static_cast<double>(rows_);
  for (size_t c = 0; c < C; ++c) {
    const double d = s[c] / n;
    mean[c] = static_cast<float>(static_cast<double>(x_[c]) + d);
    var[c] = static_cast<float>(std::max(0.0, s[C + c] / n - d * d));
  }
}

void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var, int threads) {
  if (rows == 0) {
    std::fill(mean, mean + cols, 0.0f);
    std::fill(var, var + cols, 0.0f);
    return;
  }
  ColumnMomentSums sums(rows, cols, x);
  const int nt = rows * cols >= kParallelValues ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t k = 0; k < sums.chunks(); ++k) sums.add_chunk(k);
  sums.finish(mean, var);
}

namespace {

// Rows of one block of an activation's pass: about 16 KB of values, which stay in L1 between the
// normalisation and the activation.
int64_t block_rows(int64_t cols) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)); }

// y = x * scale + shift per column, clipped to [low, high] as relu and relu6 clip (NaN stays NaN), for
// rows [r0, r1): forward's values, and backward's again. y holds rows from r0.
KX_CLONES_AVX2 void scale_shift_rows(const RowClip& clip, int64_t r0, int64_t r1, int64_t cols, const float* x,
                                     const float* scale, const float* shift, float* y) {
  const float low = clip.low, high = clip.high;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + (r - r0) * cols;
    prefetch_row(xr + prefetch_offset(cols), cols);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float v = xr[c] * scale[c] + shift[c];
      const float above = v < low ? low : v;
      yr[c] = above > high ? high : above;
    }
  }
}

// dx = k * dy + a * x + b per column, for rows [r0, r1).
KX_CLONES_AVX2 void input_grad_rows(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* dy,
                                    const float* k, const float* a, const float* b, float* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const float *xr = x + r * cols, *gr = dy + r * cols;
    float* dr = dx + r * cols;
    prefetch_row(xr + prefetch_offset(cols), cols);
    prefetch_row(gr + prefetch_offset(cols), cols);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) dr[c] = k[c] * gr[c] + a[c] * xr[c] + b[c];
  }
}

// The per-column scale and shift of y = x * scale + shift.
void scale_and_shift(int64_t cols, const float* mean, const float* var, float epsilon, const float* gamma,
                     const float* beta, std::vector<float>& scale, std::vector<float>& shift) {
  scale.resize(static_cast<size_t>(cols));
  shift.resize(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    const double s = (gamma ? gamma[c] : 1.0) / std::sqrt(static_cast<double>(var[c]) + epsilon);
    scale[static_cast<size_t>(c)] = static_cast<float>(s);
    shift[static_cast<size_t>(c)] = static_cast<float>((beta ? beta[c] : 0.0) - mean[c] * s);
  }
}

}  // namespace

void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var, float epsilon,
                      const float* gamma, const float* beta, Activation act, float* y, int threads) {
  std::vector<float> scale, shift;
  scale_and_shift(cols, mean, var, epsilon, gamma, beta, scale, shift);
  const int64_t per_block = block_rows(cols), blocks = (rows + per_block - 1) / per_block;
  const int nt = rows * cols >= kParallelValues ? threads : 1;
  const RowClip clip = row_clip(act);  // no clip for the activations not fused_in_rows
  const bool second_pass = act != Activation::None && !fused_in_rows(act);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * per_block, r1 = std::min(rows, r0 + per_block);
    float* yb = y + r0 * cols;
    if (act == Activation::Silu && swish_of_affine_rows(r0, r1, cols, x, scale.data(), shift.data(), yb, false)) continue;
    scale_shift_rows(clip, r0, r1, cols, x, scale.data(), shift.data(), yb);
    if (second_pass) pointwise_activation_span(act, (r1 - r0) * cols, yb, yb);
  }
}

void batch_norm_backward(int64_t rows, int64_t cols, const float* x, float* dy, const float* mean, const float* var,
                         float epsilon, const float* gamma, const float* beta, Activation act, float* dx,
                         float* dgamma, float* dbeta, int threads) {
  std::vector<double> invstd(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) invstd[static_cast<size_t>(c)] = 1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon);
  std::vector<float> scale, shift;
  if (act != Activation::None) scale_and_shift(cols, mean, var, epsilon, gamma, beta, scale, shift);
  const int64_t per_block = block_rows(cols);
  // dbeta = sum dy, dgamma = sum dy * xhat; with an activation, dy first becomes the gradient at its
  // input: row by row in the summing loop for those fused_in_rows, else block by block (forward's
  // values again, then the activation's gradient from them), so that each block is summed while it is
  // in cache. The sums keep their order: the same as without.
  const std::vector<double> s = column_sums<2>(rows, cols, threads, [&](int64_t r0, int64_t r1, double* p) {
    if (act == Activation::None) return sum_batch_norm_grads(nullptr, r0, r1, cols, x, dy, {}, {}, mean, invstd.data(), p);
    if (fused_in_rows(act)) {
      const RowClip clip = row_clip(act);
      return sum_batch_norm_grads(&clip, r0, r1, cols, x, dy, scale.data(), shift.data(), mean, invstd.data(), p);
    }
    std::vector<float> values(static_cast<size_t>(per_block * cols));
    for (int64_t b0 = r0; b0 < r1; b0 += per_block) {
      const int64_t b1 = std::min(r1, b0 + per_block), n = (b1 - b0) * cols;
      if (act != Activation::Silu ||
          !swish_of_affine_rows(b0, b1, cols, x, scale.data(), shift.data(), dy + b0 * cols, true)) {
        scale_shift_rows({}, b0, b1, cols, x, scale.data(), shift.data(), values.data());
        pointwise_activation_backward_span(act, n, values.data(), dy + b0 * cols, dy + b0 * cols);
      }
      sum_batch_norm_grads(nullptr, b0, b1, cols, x, dy, {}, {}, mean, invstd.data(), p);
    }
  });
  for (int64_t c = 0; c < cols; ++c) {
    dbeta[c] = static_cast<float>(s[static_cast<size_t>(c)]);
    dgamma[c] = static_cast<float>(s[static_cast<size_t>(cols + c)]);
  }
  if (!dx) return;
  // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), as y = x * a + b per column.
  std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols)), k(static_cast<size_t>(cols));
  const double n = static_cast<double>(rows);
  for (int64_t c = 0; c < cols; ++c) {
    const size_t u = static_cast<size_t>(c);
    const double is = invstd[u], gi = gamma[c] * is;
    const double mean_dy = s[u] / n, mean_dyx = s[static_cast<size_t>(cols) + u] / n;
    // dx = gi * dy - gi * mean_dy - gi * mean_dyx * is * (x - mean)
    k[u] = static_cast<float>(gi);
    a[u] = static_cast<float>(-gi * mean_dyx * is);
    b[u] = static_cast<float>(-gi * mean_dy + gi * mean_dyx * is * mean[c]);
  }
  const int64_t blocks = (rows + per_block - 1) / per_block;
  const int nt = rows * cols >= kParallelValues ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t blk = 0; blk < blocks; ++blk)
    input_grad_rows(blk * per_block, std::min(rows, (blk + 1) * per_block), cols, x, dy, k.data(), a.data(), b.data(), dx);
}

// Layer normalisation's rows, one at a time, in loops the compiler vectorises (KX_CLONES_AVX2): the row
// sums in double through SIMD reductions, whose order is fixed by the code, not the thread count.
KX_CLONES_AVX2 void layer_norm_rows(int64_t first, int64_t last, int64_t cols, const float* x, float epsilon,
                               const float* gamma, const float* beta, float* y, float* mean, float* inv_std) {
  for (int64_t r = first; r < last; ++r) {
    const float* xr = x + r * cols;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) s += xr[c];
    const double m = s / static_cast<double>(cols);
    double q = 0;
#pragma omp simd reduction(+ : q)
    for (int64_t c = 0; c < cols; ++c) q += (xr[c] - m) * (xr[c] - m);
    const float mf = static_cast<float>(m), inv = layer_norm_inv_std(q / static_cast<double>(cols), epsilon);
    mean[r] = mf;
    inv_std[r] = inv;
    float* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = layer_norm_value(xr[c], mf, inv, gamma, beta, c);
  }
}

KX_CLONES_AVX2 void layer_norm_input_grad_rows(int64_t first, int64_t last, int64_t cols, const float* x, const float* dy,
                                          const float* mean, const float* inv_std, const float* gamma, float* dx) {
  for (int64_t r = first; r < last; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const double m = mean[r], inv = inv_std[r];
    double a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
    for (int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * (gamma ? gamma[c] : 1.0f);
      a += g;
      b += g * (static_cast<double>(xr[c]) - m) * inv;
    }
    float* dxr = dx + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      dxr[c] = layer_norm_input_grad(xr[c], dyr[c], mean[r], inv_std[r], gamma ? gamma[c] : 1.0f, a, b,
                                     static_cast<double>(cols));
  }
}

// sums[0][c] += dy and sums[1][c] += dy * xhat over rows [first, last), row by row.
KX_CLONES_AVX2 void layer_norm_param_sums(int64_t first, int64_t last, int64_t cols, const float* x, const float* dy,
                                     const float* mean, const float* inv_std, double* sums) {
  double* dbeta = sums;
  double* dgamma = sums + cols;
  for (int64_t r = first; r < last; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const double m = mean[r], inv = inv_std[r];
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const double g = dyr[c];
      dbeta[c] += g;
      dgamma[c] += g * (static_cast<double>(xr[c]) - m) * inv;
    }
  }
}

void layer_norm_forward(int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                        const float* beta, float* y, float* mean, float* inv_std, int threads) {
  const int nt = rows * cols >= kParallelValues ? static_cast<int>(std::min<int64_t>(threads, rows)) : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int t = 0; t < nt; ++t)
    layer_norm_rows(rows * t / nt, rows * (t + 1) / nt, cols, x, epsilon, gamma, beta, y, mean, inv_std);
}

void layer_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                         const float* inv_std, const float* gamma, float* dx, float* dgamma, float* dbeta,
                         int threads) {
  const int nt = rows * cols >= kParallelValues ? static_cast<int>(std::min<int64_t>(threads, rows)) : 1;
  if (dgamma || dbeta) {
    // Per fixed chunk of rows, then the chunks added in order: the same sums whatever the thread count.
    constexpr int64_t kChunkRows = 512;
    const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
    std::vector<double> partial(static_cast<size_t>(chunks * 2 * cols), 0.0);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && chunks > 1)
    for (int64_t k = 0; k < chunks; ++k)
      layer_norm_param_sums(k * kChunkRows, std::min(rows, (k + 1) * kChunkRows), cols, x, dy, mean, inv_std,
                            partial.data() + k * 2 * cols);
    for (int64_t c = 0; c < cols; ++c) {
      double sb = 0, sg = 0;
      for (int64_t k = 0; k < chunks; ++k) {
        sb += partial[static_cast<size_t>(k * 2 * cols + c)];
        sg += partial[static_cast<size_t>(k * 2 * cols + cols + c)];
      }
      if (dbeta) dbeta[c] = static_cast<float>(sb);
      if (dgamma) dgamma[c] = static_cast<float>(sg);
    }
  }
  if (!dx) return;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int t = 0; t < nt; ++t)
    layer_norm_input_grad_rows(rows * t / nt, rows * (t + 1) / nt, cols, x, dy, mean, inv_std, gamma, dx);
}

}  // namespace kx::backend::cpu
