// The sequence layers' kernels: the embedding lookup and its gradient, Masking's mask, and the element-wise part of an
// LSTM or GRU step (the layers run the GEMMs through cuBLASLt). The step kernels are one thread per
// (row, unit) on recurrent_math.hpp's formulas, as the CPU computes them; the embedding gradient is one
// thread per column of the table, adding the ids' rows in increasing order (the CPU's order, no
// atomics), so it repeats bitwise.
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/recurrent_math.hpp"

namespace kx::backend::cuda {
namespace {

// The table row of an id, or -1 outside [0, vocab) or for a non-integer: such an id reads nothing.
__device__ int64_t table_row(float id, int64_t vocab) {
  if (!(id >= 0.0f) || id >= static_cast<float>(vocab) || id != floorf(id)) return -1;
  return static_cast<int64_t>(id);
}

__global__ void embedding_forward_kernel(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table,
                                         float* y, float* mask) {
  KX_GRID_STRIDE(e, n * dim) {
    const int64_t i = e / dim, d = e % dim;
    const int64_t row = table_row(ids[i], vocab);
    y[e] = row < 0 ? 0.0f : table[row * dim + d];
    if (mask && d == 0) mask[i] = ids[i] != 0.0f ? 1.0f : 0.0f;
  }
}

__global__ void zero_kernel(int64_t n, float* x) {
  KX_GRID_STRIDE(i, n) x[i] = 0.0f;
}

__global__ void embedding_backward_kernel(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy,
                                          float* dtable) {
  KX_GRID_STRIDE(d, dim) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = table_row(ids[i], vocab);
      if (row >= 0) dtable[row * dim + d] = add_rn(dtable[row * dim + d], dy[i * dim + d]);
    }
  }
}

// One thread per position: it reads the position's features, then writes them and the mask.
__global__ void masking_forward_kernel(int64_t positions, int64_t features, float mask_value, const float* x, float* y,
                                       float* mask) {
  KX_GRID_STRIDE(p, positions) {
    const float* in = x + p * features;
    bool kept = false;
    for (int64_t f = 0; f < features; ++f) kept = kept || in[f] != mask_value;
    for (int64_t f = 0; f < features; ++f) y[p * features + f] = kept ? in[f] : 0.0f;
    mask[p] = kept ? 1.0f : 0.0f;
  }
}

__global__ void masking_backward_kernel(int64_t positions, int64_t features, const float* mask, const float* dy,
                                        float* dx) {
  KX_GRID_STRIDE(e, positions * features) dx[e] = mask[e / features] != 0.0f ? dy[e] : 0.0f;
}

__global__ void lstm_forward_kernel(RecurrentStep s, float* gates, const float* c_prev, const float* h_prev,
                                    const float* mask, float* c, float* h, float* y) {
  KX_GRID_STRIDE(e, s.rows * s.units) {
    lstm_value_forward(s, e / s.units, e % s.units, gates, c_prev, h_prev, mask, c, h, y);
  }
}

__global__ void lstm_backward_kernel(RecurrentStep s, float* gates, const float* c_prev, const float* c,
                                     const float* mask, const float* dy, float* dh, float* dc) {
  KX_GRID_STRIDE(e, s.rows * s.units) {
    lstm_value_backward(s, e / s.units, e % s.units, gates, c_prev, c, mask, dy, dh, dc);
  }
}

__global__ void gru_forward_kernel(RecurrentStep s, float* gates, const float* recurrent, const float* h_prev,
                                   const float* mask, float* h, float* y) {
  KX_GRID_STRIDE(e, s.rows * s.units) {
    gru_value_forward(s, e / s.units, e % s.units, gates, recurrent, h_prev, mask, h, y);
  }
}

__global__ void gru_backward_kernel(RecurrentStep s, float* gates, float* recurrent, const float* h_prev,
                                    const float* mask, const float* dy, float* dh) {
  KX_GRID_STRIDE(e, s.rows * s.units) {
    gru_value_backward(s, e / s.units, e % s.units, gates, recurrent, h_prev, mask, dy, dh);
  }
}

}  // namespace

void embedding_forward(cudaStream_t s, int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table,
                       float* y, float* mask) {
  if (n * dim > 0) embedding_forward_kernel<<<blocks_for(n * dim), kThreads, 0, s>>>(n, vocab, dim, ids, table, y, mask);
}

void embedding_backward(cudaStream_t s, int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy,
                        float* dtable) {
  if (vocab * dim > 0) zero_kernel<<<blocks_for(vocab * dim), kThreads, 0, s>>>(vocab * dim, dtable);
  if (dim > 0) embedding_backward_kernel<<<blocks_for(dim), kThreads, 0, s>>>(n, vocab, dim, ids, dy, dtable);
}

void masking_forward(cudaStream_t s, int64_t positions, int64_t features, float mask_value, const float* x, float* y,
                     float* mask) {
  if (positions > 0)
    masking_forward_kernel<<<blocks_for(positions), kThreads, 0, s>>>(positions, features, mask_value, x, y, mask);
}

void masking_backward(cudaStream_t s, int64_t positions, int64_t features, const float* mask, const float* dy,
                      float* dx) {
  if (positions * features > 0)
    masking_backward_kernel<<<blocks_for(positions * features), kThreads, 0, s>>>(positions, features, mask, dy, dx);
}

void lstm_step_forward(cudaStream_t st, const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                       const float* mask, float* c, float* h, float* y) {
  const int64_t n = s.rows * s.units;
  if (n > 0) lstm_forward_kernel<<<blocks_for(n), kThreads, 0, st>>>(s, gates, c_prev, h_prev, mask, c, h, y);
}

void lstm_step_backward(cudaStream_t st, const RecurrentStep& s, float* gates, const float* c_prev, const float* c,
                        const float* mask, const float* dy, float* dh, float* dc) {
  const int64_t n = s.rows * s.units;
  if (n > 0) lstm_backward_kernel<<<blocks_for(n), kThreads, 0, st>>>(s, gates, c_prev, c, mask, dy, dh, dc);
}

void gru_step_forward(cudaStream_t st, const RecurrentStep& s, float* gates, const float* recurrent,
                      const float* h_prev, const float* mask, float* h, float* y) {
  const int64_t n = s.rows * s.units;
  if (n > 0) gru_forward_kernel<<<blocks_for(n), kThreads, 0, st>>>(s, gates, recurrent, h_prev, mask, h, y);
}

void gru_step_backward(cudaStream_t st, const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev,
                       const float* mask, const float* dy, float* dh) {
  const int64_t n = s.rows * s.units;
  if (n > 0) gru_backward_kernel<<<blocks_for(n), kThreads, 0, st>>>(s, gates, recurrent, h_prev, mask, dy, dh);
}

}  // namespace kx::backend::cuda
