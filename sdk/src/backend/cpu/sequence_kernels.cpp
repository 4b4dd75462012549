#include "backend/cpu/sequence_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "backend/cpu/target_clones.hpp"
#include "backend/cpu/vector_math.hpp"
#include "backend/recurrent_math.hpp"
#include "kx/error.hpp"

namespace kx::backend::cpu {
namespace {

// Below this many values a parallel region costs more than it saves.
constexpr int64_t kParallelValues = 1 << 14;

// The row of the table an id names, or -1 when it names none (outside [0, vocab), or not an integer).
int64_t table_row(float id, int64_t vocab) {
  if (!(id >= 0.0f) || id >= static_cast<float>(vocab) || id != std::floor(id)) return -1;
  return static_cast<int64_t>(id);
}

// An id as the caller wrote it: 7, -1, 2.5.
std::string id_text(float id) {
  std::ostringstream s;
  s << id;
  return s.str();
}

}  // namespace

void embedding_forward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table, float* y,
                       float* mask, int threads) {
  // Every id is checked before anything is written, as TensorFlow's CPU gather refuses the batch.
  for (int64_t i = 0; i < n; ++i)
    require(table_row(ids[i], vocab) >= 0, Status::InvalidArgument,
            "Embedding: input " + id_text(ids[i]) + " at position " + std::to_string(i) +
                " of the batch is not an integer in [0, " + std::to_string(vocab) + ") (the layer's input_dim)");
#pragma omp parallel for num_threads(threads) if (n * dim >= kParallelValues)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = table + table_row(ids[i], vocab) * dim;
    float* out = y + i * dim;
    for (int64_t d = 0; d < dim; ++d) out[d] = row[d];
    if (mask) mask[i] = ids[i] != 0.0f ? 1.0f : 0.0f;
  }
}

void embedding_backward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy, float* dtable,
                        int threads) {
  // Each value sums its ids' gradients in increasing order of i, the CUDA kernel's order.
#pragma omp parallel for num_threads(threads) if (vocab * dim >= kParallelValues)
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t d = 0; d < dim; ++d) dtable[v * dim + d] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = table_row(ids[i], vocab);
    if (row < 0) continue;
    float* out = dtable + row * dim;
    const float* g = dy + i * dim;
    for (int64_t d = 0; d < dim; ++d) out[d] += g[d];
  }
}

void masking_forward(int64_t positions, int64_t features, float mask_value, const float* x, float* y, float* mask,
                     int threads) {
#pragma omp parallel for num_threads(threads) if (positions * features >= kParallelValues)
  for (int64_t p = 0; p < positions; ++p) {
    const float* in = x + p * features;
    float* out = y + p * features;
    bool kept = false;
    for (int64_t f = 0; f < features; ++f) kept = kept || in[f] != mask_value;
    for (int64_t f = 0; f < features; ++f) out[f] = kept ? in[f] : 0.0f;
    mask[p] = kept ? 1.0f : 0.0f;
  }
}

void masking_backward(int64_t positions, int64_t features, const float* mask, const float* dy, float* dx, int threads) {
#pragma omp parallel for num_threads(threads) if (positions * features >= kParallelValues)
  for (int64_t p = 0; p < positions; ++p) {
    const bool kept = mask[p] != 0.0f;
    for (int64_t f = 0; f < features; ++f) dx[p * features + f] = kept ? dy[p * features + f] : 0.0f;
  }
}

namespace {

// Keras's default LSTM (tanh, sigmoid): recurrent_math.hpp's lstm_value_forward / _backward over rows
// [first, last), the same operations in the same order, with the vectorised sigmoid and tanh
// (vector_math.hpp) in loops over the units the compiler vectorises. Each loop is written once per
// case that changes its arithmetic (a previous state or none); what only copies (y, dy, masked rows)
// is done outside the vectorised loops, which keeps the CPU clones of these kernels small.

// A masked step (rare: padding): the gates as the other rows compute them, h and c carried over.
[[gnu::noinline]] void lstm_masked_row_forward(const RecurrentStep& s, float* zi, const float* cp, const float* hp,
                                               float* cr, float* hr, float* yr) {
  const int64_t u = s.units;
  float* zf = zi + u;
  float* zg = zi + 2 * u;
  float* zo = zi + 3 * u;
  for (int64_t j = 0; j < u; ++j) {
    zi[j] = vector_sigmoid(zi[j]), zf[j] = vector_sigmoid(zf[j]), zg[j] = vector_tanh(zg[j]),
    zo[j] = vector_sigmoid(zo[j]);
    const float cpv = cp ? cp[j] : 0.0f, hpv = hp ? hp[j] : 0.0f;
    cr[j] = cpv;
    hr[j] = hpv;
    if (yr) yr[j] = s.zero_masked_output != 0 ? 0.0f : hpv;
  }
}

}  // namespace

KX_CLONES_AVX2 void lstm_span_forward(const RecurrentStep& s, int64_t first, int64_t last, float* gates,
                                 const float* c_prev, const float* h_prev, const float* mask, float* c, float* h,
                                 float* y) {
  const int64_t u = s.units;
  for (int64_t r = first; r < last; ++r) {
    float* zi = gates + r * s.gates_ld;
    float* zf = zi + u;
    float* zg = zi + 2 * u;
    float* zo = zi + 3 * u;
    const int64_t at = r * s.state_ld;
    const float* cp = c_prev ? c_prev + at : nullptr;
    float* cr = c + at;
    float* hr = h + at;
    float* yr = y ? y + r * s.y_ld : nullptr;
    if (!step_kept(s, mask, r)) {
      lstm_masked_row_forward(s, zi, cp, h_prev ? h_prev + at : nullptr, cr, hr, yr);
      continue;
    }
    if (cp) {
#pragma omp simd
      for (int64_t j = 0; j < u; ++j) {
        const float i = vector_sigmoid(zi[j]), f = vector_sigmoid(zf[j]), g = vector_tanh(zg[j]),
                    o = vector_sigmoid(zo[j]);
        zi[j] = i, zf[j] = f, zg[j] = g, zo[j] = o;
        const float c_new = f * cp[j] + i * g;
        cr[j] = c_new;
        hr[j] = o * vector_tanh(c_new);
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < u; ++j) {
        const float i = vector_sigmoid(zi[j]), f = vector_sigmoid(zf[j]), g = vector_tanh(zg[j]),
                    o = vector_sigmoid(zo[j]);
        zi[j] = i, zf[j] = f, zg[j] = g, zo[j] = o;
        const float c_new = f * 0.0f + i * g;  // as with a zero state: a NaN gate stays visible
        cr[j] = c_new;
        hr[j] = o * vector_tanh(c_new);
      }
    }
    if (yr) std::copy(hr, hr + u, yr);
  }
}

KX_CLONES_AVX2 void lstm_span_backward(const RecurrentStep& s, int64_t first, int64_t last, float* gates,
                                  const float* c_prev, const float* c, const float* mask, const float* dy, float* dh,
                                  float* dc) {
  const int64_t u = s.units;
  for (int64_t r = first; r < last; ++r) {
    float* zi = gates + r * s.gates_ld;
    float* zf = zi + u;
    float* zg = zi + 2 * u;
    float* zo = zi + 3 * u;
    const float* dyr = dy ? dy + r * s.y_ld : nullptr;
    float* dhr = dh + r * u;
    float* dcr = dc + r * u;
    if (!step_kept(s, mask, r)) {  // h and c passed through unchanged: their gradients go on to the step before
      const bool add_dy = dyr && !s.zero_masked_output;
      for (int64_t j = 0; j < u; ++j) {
        zi[j] = zf[j] = zg[j] = zo[j] = 0.0f;
        if (add_dy) dhr[j] = dhr[j] + dyr[j];
      }
      continue;
    }
    // dh_t = dh + dy, summed once here as the loop below would.
    if (dyr)
      for (int64_t j = 0; j < u; ++j) dhr[j] = dhr[j] + dyr[j];
    const float* cp = c_prev ? c_prev + r * s.state_ld : nullptr;
    const float* cr = c + r * s.state_ld;
#pragma omp simd
    for (int64_t j = 0; j < u; ++j) {
      const float dh_t = dhr[j];
      const float i = zi[j], f = zf[j], g = zg[j], o = zo[j];
      const float cpv = cp ? cp[j] : 0.0f;
      const float tc = vector_tanh(cr[j]);
      const float dct = dcr[j] + tanh_backward(tc, dh_t * o);
      zi[j] = sigmoid_backward(i, dct * g);
      zf[j] = sigmoid_backward(f, dct * cpv);
      zg[j] = tanh_backward(g, dct * i);
      zo[j] = sigmoid_backward(o, dh_t * tc);
      dcr[j] = dct * f;
      dhr[j] = 0.0f;
    }
  }
}

namespace {

bool default_lstm(const RecurrentStep& s) {
  return s.activation == Activation::Tanh && s.recurrent_activation == Activation::Sigmoid;
}

// The threads' spans of rows for one step: whole rows each, at most one span per 8 rows.
int row_parts(const RecurrentStep& s, int64_t values_per_row, int threads) {
  if (s.rows * values_per_row < kParallelValues) return 1;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, s.rows / 8)));
}

}  // namespace

void lstm_step_forward(const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                       const float* mask, float* c, float* h, float* y, int threads) {
  if (default_lstm(s) && (c_prev != nullptr) == (h_prev != nullptr)) {
    const int parts = row_parts(s, 4 * s.units, threads);
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
    for (int t = 0; t < parts; ++t)
      lstm_span_forward(s, s.rows * t / parts, s.rows * (t + 1) / parts, gates, c_prev, h_prev, mask, c, h, y);
    return;
  }
#pragma omp parallel for num_threads(threads) if (s.rows * s.units * 4 >= kParallelValues)
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.units; ++j) lstm_value_forward(s, r, j, gates, c_prev, h_prev, mask, c, h, y);
}

void lstm_step_backward(const RecurrentStep& s, float* gates, const float* c_prev, const float* c, const float* mask,
                        const float* dy, float* dh, float* dc, int threads) {
  if (default_lstm(s)) {
    const int parts = row_parts(s, 4 * s.units, threads);
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
    for (int t = 0; t < parts; ++t)
      lstm_span_backward(s, s.rows * t / parts, s.rows * (t + 1) / parts, gates, c_prev, c, mask, dy, dh, dc);
    return;
  }
#pragma omp parallel for num_threads(threads) if (s.rows * s.units * 4 >= kParallelValues)
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.units; ++j) lstm_value_backward(s, r, j, gates, c_prev, c, mask, dy, dh, dc);
}

void gru_step_forward(const RecurrentStep& s, float* gates, const float* recurrent, const float* h_prev,
                      const float* mask, float* h, float* y, int threads) {
#pragma omp parallel for num_threads(threads) if (s.rows * s.units * 3 >= kParallelValues)
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.units; ++j) gru_value_forward(s, r, j, gates, recurrent, h_prev, mask, h, y);
}

void gru_step_backward(const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev, const float* mask,
                       const float* dy, float* dh, int threads) {
#pragma omp parallel for num_threads(threads) if (s.rows * s.units * 3 >= kParallelValues)
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.units; ++j) gru_value_backward(s, r, j, gates, recurrent, h_prev, mask, dy, dh);
}

}  // namespace kx::backend::cpu
