// Column sums of a rows x cols matrix in double, in an order fixed by (rows, cols) alone, so that they
// repeat bitwise from run to run and from GPU to GPU. The rows are cut into chunks; a block of 32
// columns x 8 row groups sums one chunk (each thread every 8th row of it, then the 8 partials in
// order), and a second kernel adds the chunks' sums in a fixed order. A matrix of few columns and many
// rows (a batch normalisation over a batch of images) so keeps the whole GPU busy, where one block
// per 32 columns would leave it nearly idle. A matrix with enough columns to fill the GPU is summed in
// one chunk, by one kernel.
//
// Term: `__device__ void operator()(int64_t r, int64_t c, double* acc) const` adds row r's terms of
// column c into acc[0..K). Finish: `__device__ void operator()(int64_t c, const double* sums) const`
// stores column c's results.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"

namespace kx::backend::cuda {

inline constexpr int kColumnRowGroups = 8;
inline constexpr int64_t kColumnMinChunkRows = 256;

struct ColumnChunks {
  int64_t count;  // 1: one kernel, no scratch
  int64_t rows;   // per chunk; the last may hold fewer
};

inline ColumnChunks column_chunks(int64_t rows, int64_t cols) {
  const int64_t column_blocks = (cols + 31) / 32;
  const int64_t count = std::min(kColumnMaxBlocks / column_blocks, rows / kColumnMinChunkRows);
  if (count < 2) return {1, rows};
  const int64_t per = (rows + count - 1) / count;
  return {(rows + per - 1) / per, per};
}

template <int K, class Term>
__device__ void chunk_column_sums(int64_t begin, int64_t end, int64_t cols, const Term& term, double (&out)[K]) {
  __shared__ double part[K][kColumnRowGroups][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  double acc[K] = {};
  if (c < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRowGroups) term(r, c, acc);
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  for (int k = 0; k < K; ++k) {
    double s = 0;
    for (int g = 0; g < kColumnRowGroups; ++g) s += part[k][g][threadIdx.x];
    out[k] = s;
  }
  __syncthreads();  // part may be reused by a later call in the same kernel
}

template <int K, class Term, class Finish>
__global__ void whole_column_sums_kernel(int64_t rows, int64_t cols, Term term, Finish finish) {
  double s[K];
  chunk_column_sums<K>(0, rows, cols, term, s);
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.y == 0 && c < cols) finish(c, s);
}

// Block (x, y) sums chunk y of its 32 columns into partials[(k * chunks + y) * cols + c].
template <int K, class Term>
__global__ void chunk_column_sums_kernel(int64_t rows, int64_t cols, ColumnChunks chunks, Term term,
                                         double* partials) {
  const int64_t begin = blockIdx.y * chunks.rows;
  const int64_t end = begin + chunks.rows < rows ? begin + chunks.rows : rows;
  double s[K];
  chunk_column_sums<K>(begin, end, cols, term, s);
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.y == 0 && c < cols)
    for (int k = 0; k < K; ++k) partials[(k * chunks.count + blockIdx.y) * cols + c] = s[k];
}

// A warp per column: lane l adds chunks l, l + 32, ... in order, then the lanes' sums are added in a
// fixed butterfly. (A thread per column would leave most of the GPU idle over a long serial loop.)
template <int K, class Finish>
__global__ void add_chunk_sums_kernel(int64_t cols, int64_t chunks, const double* partials, Finish finish) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  if (c >= cols) return;  // the whole warp leaves together
  double s[K];
  for (int k = 0; k < K; ++k) {
    double acc = 0;
    for (int64_t j = threadIdx.x; j < chunks; j += 32) acc += partials[(k * chunks + j) * cols + c];
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    s[k] = acc;
  }
  if (threadIdx.x == 0) finish(c, s);
}

inline dim3 column_threads() { return dim3(32, kColumnRowGroups); }

// The sums of every column, then finish(c, sums); scratch holds kColumnScratchDoubles.
template <int K, class Term, class Finish>
void column_sums(cudaStream_t s, int64_t rows, int64_t cols, const Term& term, const Finish& finish, double* scratch) {
  static_assert(K <= kColumnMaxSums);
  if (cols <= 0) return;
  const auto column_blocks = static_cast<unsigned>((cols + 31) / 32);
  const ColumnChunks chunks = column_chunks(rows, cols);
  if (chunks.count == 1) {
    whole_column_sums_kernel<K><<<column_blocks, column_threads(), 0, s>>>(rows, cols, term, finish);
    return;
  }
  chunk_column_sums_kernel<K><<<dim3(column_blocks, static_cast<unsigned>(chunks.count)), column_threads(), 0, s>>>(
      rows, cols, chunks, term, scratch);
  constexpr int kColumnsPerBlock = 8;
  add_chunk_sums_kernel<K><<<static_cast<unsigned>((cols + kColumnsPerBlock - 1) / kColumnsPerBlock),
                             dim3(32, kColumnsPerBlock), 0, s>>>(cols, chunks.count, scratch, finish);
}

}  // namespace kx::backend::cuda
