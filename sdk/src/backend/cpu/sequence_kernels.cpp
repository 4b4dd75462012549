#include "backend/cpu/sequence_kernels.hpp"

#include <cmath>
#include <sstream>
#include <string>

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

void lstm_step_forward(const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                       const float* mask, float* c, float* h, float* y, int threads) {
#pragma omp parallel for num_threads(threads) if (s.rows * s.units * 4 >= kParallelValues)
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.units; ++j) lstm_value_forward(s, r, j, gates, c_prev, h_prev, mask, c, h, y);
}

void lstm_step_backward(const RecurrentStep& s, float* gates, const float* c_prev, const float* c, const float* mask,
                        const float* dy, float* dh, float* dc, int threads) {
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
