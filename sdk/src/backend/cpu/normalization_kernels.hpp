// CPU kernels of batch normalisation over [rows, cols] (cols = channels, rows = samples x positions).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/range_done.hpp"
#include "kx/layer.hpp"

namespace kx::backend::cpu {

// The rows of each partial sum of the column sums below: fixed by the shape, never by the thread count.
int64_t chunk_rows(int64_t cols);

// column_moments's sums, chunk by chunk of rows: a kernel that writes x [rows, cols] adds each chunk
// as soon as it has written it, while it is in cache, on whichever thread wrote it; finish() then gives
// column_moments's values bit for bit (the same chunks, shift and order of addition). x's first row
// shifts every column (column_moments says why): it must hold its final values before add_chunk.
class ColumnMomentSums {
 public:
  ColumnMomentSums(int64_t rows, int64_t cols, const float* x);
  int64_t chunk_rows() const { return chunk_rows_; }
  int64_t chunks() const { return (rows_ + chunk_rows_ - 1) / chunk_rows_; }
  // Adds the rows of chunk k of x; each chunk once, chunks on any threads.
  void add_chunk(int64_t k);
  // add_chunk(k) for a kernel's RangeDone, with ranges of chunk_rows() rows.
  RangeDone adder() {
    return {[](void* sums, int64_t k) { static_cast<ColumnMomentSums*>(sums)->add_chunk(k); }, this};
  }
  void finish(float* mean, float* var) const;

 private:
  int64_t rows_, cols_, chunk_rows_;
  const float* x_;
  bool avx512_;
  std::vector<double> partial_;
};

void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var, int threads);
void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var, float epsilon,
                      const float* gamma, const float* beta, Activation act, float* y, int threads);
void batch_norm_backward(int64_t rows, int64_t cols, const float* x, float* dy, const float* mean, const float* var,
                         float epsilon, const float* gamma, const float* beta, Activation act, float* dx,
                         float* dgamma, float* dbeta, int threads);

// Layer normalisation over each row of [rows, cols] (backend_ops.hpp's layer_norm_forward/backward).
void layer_norm_forward(int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                        const float* beta, float* y, float* mean, float* inv_std, int threads);
void layer_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                         const float* inv_std, const float* gamma, float* dx, float* dgamma, float* dbeta,
                         int threads);

}  // namespace kx::backend::cpu
