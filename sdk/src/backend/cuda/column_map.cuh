// Elementwise work over a rows x cols matrix (leading dimension ld) whose elements need per-column
// values that cost more than the element's own work: a batch normalisation's scale from its variance,
// or just the column index, which a flat loop finds with a 64-bit division per element. A thread per
// column and chunk of rows (the chunks of column_sums.cuh) computes them once, then walks its rows.
// Matrices of under 32 columns, where most lanes would idle, take a flat grid-stride loop instead.
//
// Op: `__device__ T column(int64_t c) const` gives column c's values, and
// `__device__ void operator()(int64_t r, int64_t c, const T& values) const` does element (r, c).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/launch.cuh"

namespace kx::backend::cuda {

template <class Op>
__global__ void column_map_kernel(int64_t rows, int64_t cols, ColumnChunks chunks, Op op) {
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  if (c >= cols) return;
  const int64_t begin = blockIdx.y * chunks.rows;
  const int64_t end = begin + chunks.rows < rows ? begin + chunks.rows : rows;
  const auto values = op.column(c);
  for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRowGroups) op(r, c, values);
}

template <class Op>
__global__ void flat_column_map_kernel(int64_t rows, int64_t cols, Op op) {
  KX_GRID_STRIDE(i, rows * cols) {
    const int64_t c = i % cols;
    op(i / cols, c, op.column(c));
  }
}

template <class Op>
void column_map(cudaStream_t s, int64_t rows, int64_t cols, const Op& op) {
  if (rows <= 0 || cols <= 0) return;
  if (cols < 32) {
    flat_column_map_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(rows, cols, op);
    return;
  }
  const ColumnChunks chunks = column_chunks(rows, cols);
  column_map_kernel<<<dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks.count)),
                      column_threads(), 0, s>>>(rows, cols, chunks, op);
}

}  // namespace kx::backend::cuda
