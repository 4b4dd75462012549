// Reductions: bias gradients and the loss. Every sum runs in a fixed order (rows in order per thread,
// then threads, warps and blocks in order), so results repeat bitwise from run to run.
#include <cmath>

#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/loss_math.hpp"

namespace kx::backend::cuda {
namespace {

struct ColumnOfDz {
  const float* dz;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, double* acc) const { acc[0] += dz[r * cols + c]; }
};

struct StoreBiasGrad {
  float* db;
  __device__ void operator()(int64_t c, const double* s) const { db[c] = static_cast<float>(s[0]); }
};

__device__ inline double warp_sum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline double warp_max(double v) {
  for (int o = 16; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// The first index of the largest value over the warp's (value, index) pairs.
__device__ inline int64_t warp_argmax(float v, int64_t j) {
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oj = __shfl_xor_sync(0xffffffffu, j, o);
    if (ov > v || (ov == v && oj < j)) v = ov, j = oj;
  }
  return j;
}
__device__ inline int64_t row_argmax(const float* v, int64_t n, int lane) {
  float best = -INFINITY;
  int64_t at = n;  // beyond every real index: loses ties
  for (int64_t j = lane; j < n; j += 32)
    if (v[j] > best || at == n) best = v[j], at = j;
  if (at == n) best = -INFINITY;
  return warp_argmax(best, at);
}

struct RowResult {
  double loss, correct;
};

// One row by one warp; every lane returns the row's loss and correct count.
__device__ RowResult row_loss(LossKind kind, bool logits, AccuracyKind accuracy, int64_t cols, const float* o,
                              const float* t, int64_t y_cols, float scale, float* d, int lane, float huber_delta) {
  double loss = 0;
  switch (kind) {
    case LossKind::SparseCategoricalCrossentropy:
    case LossKind::CategoricalCrossentropy: {
      const bool sparse = kind == LossKind::SparseCategoricalCrossentropy;
      const int64_t label = sparse ? static_cast<int64_t>(t[0]) : -1;
      double t_sum = 0;
      if (logits) {
        double mx = -INFINITY;
        for (int64_t j = lane; j < cols; j += 32) mx = fmax(mx, static_cast<double>(o[j]));
        mx = warp_max(mx);
        double se = 0;
        for (int64_t j = lane; j < cols; j += 32) se += exp(o[j] - mx);
        const double lse = mx + log(warp_sum(se));
        for (int64_t j = lane; j < cols; j += 32) {
          const double tj = class_target(t, sparse, label, j);
          loss -= softmax_log_likelihood(tj, o[j], lse);
          t_sum += tj;
        }
        loss = warp_sum(loss);
        t_sum = warp_sum(t_sum);
        if (d)
          for (int64_t j = lane; j < cols; j += 32)
            d[j] = softmax_cross_entropy_grad(scale, o[j], lse, t_sum, class_target(t, sparse, label, j));
      } else {
        double s = 0;
        for (int64_t j = lane; j < cols; j += 32) s += o[j];
        s = warp_sum(s);
        for (int64_t j = lane; j < cols; j += 32) {
          const double tj = class_target(t, sparse, label, j);
          t_sum += tj;
          loss -= probability_log_likelihood(tj, o[j] / s);
        }
        loss = warp_sum(loss);
        t_sum = warp_sum(t_sum);
        if (d)
          for (int64_t j = lane; j < cols; j += 32)
            d[j] = probability_cross_entropy_grad(scale, o[j], s, t_sum, class_target(t, sparse, label, j));
      }
      break;
    }
    case LossKind::BinaryCrossentropy: {
      for (int64_t j = lane; j < cols; j += 32) {
        const double tj = t[j], x = o[j];
        if (logits) {
          loss += binary_logit_loss(x, tj);
          if (d) d[j] = binary_logit_grad(scale, o[j], tj, cols);
        } else {
          loss -= binary_log_likelihood(x, tj);
          if (d) d[j] = binary_probability_grad(scale, x, tj, cols);
        }
      }
      loss = warp_sum(loss) / cols;
      break;
    }
    case LossKind::MeanSquaredError: {
      for (int64_t j = lane; j < cols; j += 32) {
        const double e = static_cast<double>(o[j]) - t[j];
        loss += e * e;
        if (d) d[j] = squared_error_grad(scale, e, cols);
      }
      loss = warp_sum(loss) / cols;
      break;
    }
    case LossKind::MeanAbsoluteError: {
      for (int64_t j = lane; j < cols; j += 32) {
        const double e = static_cast<double>(o[j]) - t[j];
        loss += fabs(e);
        if (d) d[j] = absolute_error_grad(scale, e, cols);
      }
      loss = warp_sum(loss) / cols;
      break;
    }
    case LossKind::Huber: {
      for (int64_t j = lane; j < cols; j += 32) {
        const double e = static_cast<double>(o[j]) - t[j];
        loss += huber_loss(e, huber_delta);
        if (d) d[j] = huber_grad(scale, e, huber_delta, cols);
      }
      loss = warp_sum(loss) / cols;
      break;
    }
  }
  double correct = 0;
  switch (accuracy) {
    case AccuracyKind::SparseCategorical:
      correct = row_argmax(o, cols, lane) == static_cast<int64_t>(t[0]) ? 1.0 : 0.0;
      break;
    case AccuracyKind::Categorical:
      correct = row_argmax(o, cols, lane) == row_argmax(t, y_cols, lane) ? 1.0 : 0.0;
      break;
    case AccuracyKind::Binary: {
      const float threshold = binary_threshold(logits);
      double hits = 0;
      for (int64_t j = lane; j < cols; j += 32) hits += binary_hit(o[j], t[j], threshold);
      correct = warp_sum(hits) / cols;
      break;
    }
  }
  return {loss, correct};
}

constexpr int kLossWarps = 8;

// Block b's warps take rows b*8 + w, then every (gridDim * 8)-th row after; the block's sums go to
// partials[b] (loss, correct, weight).
__global__ void loss_kernel(LossKind kind, bool logits, AccuracyKind accuracy, int64_t rows, int64_t cols,
                            const float* out, const float* y, int64_t y_cols, const float* weights,
                            int64_t positions, float huber_delta, float scale, float* dout, double* partials) {
  __shared__ double warp_loss[kLossWarps], warp_correct[kLossWarps], warp_weight[kLossWarps];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  double loss = 0, correct = 0, weight = 0;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kLossWarps) + w; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kLossWarps) {
    // A sample weighs sw in the loss, its gradient and the accuracy (Keras's sample_weight) at each of
    // its positions.
    const float sw = weights ? weights[r / positions] : 1.0f;
    const RowResult rr = row_loss(kind, logits, accuracy, cols, out + r * cols, y + r * y_cols, y_cols, scale * sw,
                                  dout ? dout + r * cols : nullptr, lane, huber_delta);
    loss += sw * rr.loss;
    correct += sw * rr.correct;
    weight += sw;
  }
  if (lane == 0) warp_loss[w] = loss, warp_correct[w] = correct, warp_weight[w] = weight;
  __syncthreads();
  if (threadIdx.x == 0) {
    double l = 0, c = 0, wt = 0;
    for (int k = 0; k < kLossWarps; ++k) l += warp_loss[k], c += warp_correct[k], wt += warp_weight[k];
    partials[kLossSumCount * blockIdx.x] = l;
    partials[kLossSumCount * blockIdx.x + 1] = c;
    partials[kLossSumCount * blockIdx.x + 2] = wt;
  }
}

__global__ void add_partials_kernel(int blocks, const double* partials, double* sums) {
  double l = 0, c = 0, wt = 0;
  for (int b = 0; b < blocks; ++b)
    l += partials[kLossSumCount * b], c += partials[kLossSumCount * b + 1], wt += partials[kLossSumCount * b + 2];
  sums[0] += l;
  sums[1] += c;
  sums[2] += wt;
}

}  // namespace

void bias_grad(cudaStream_t s, int64_t rows, int64_t cols, const float* dz, float* db, double* scratch) {
  column_sums<1>(s, rows, cols, ColumnOfDz{dz, cols}, StoreBiasGrad{db}, scratch);
}

void loss(cudaStream_t s, const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y,
          int64_t y_cols, const float* weights, float grad_scale, float* dout, double* partials, double* sums) {
  if (rows == 0) return;
  const int64_t wanted = (rows + kLossWarps - 1) / kLossWarps;
  const int blocks = static_cast<int>(wanted < kLossMaxBlocks ? wanted : kLossMaxBlocks);
  loss_kernel<<<blocks, kLossWarps * 32, 0, s>>>(spec.kind, spec.logits, spec.accuracy, rows, cols, out, y, y_cols,
                                                  weights, spec.positions, spec.huber_delta, grad_scale, dout,
                                                  partials);
  add_partials_kernel<<<1, 1, 0, s>>>(blocks, partials, sums);
}

}  // namespace kx::backend::cuda
