// Batch normalisation. Per-column sums run in double in a fixed order (column_sums.cuh), so results
// repeat bitwise from run to run. That order is not the CPU's, so the moments and gradients agree with
// the CPU within a bound, not bitwise (the sums are rounded to float from double, so most elements are
// the same bits). The apply step, given the same mean and variance, is the CPU's bits.
#include <cmath>

#include "backend/cuda/column_map.cuh"
#include "backend/cuda/column_sums.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/layer_norm_math.hpp"
#include "backend/pointwise_activation_math.hpp"

namespace kx::backend::cuda {
namespace {

struct ColumnValue {
  const float* x;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, double* acc) const { acc[0] += x[r * cols + c]; }
};

struct SquaredDeviation {  // from the mean kept in double, as the CPU's second pass
  const float* x;
  int64_t cols;
  const double* mean;
  __device__ void operator()(int64_t r, int64_t c, double* acc) const {
    const double d = x[r * cols + c] - mean[c];
    acc[0] += d * d;
  }
};

struct StoreMean {
  int64_t rows;
  double* mean_d;
  float* mean;
  __device__ void operator()(int64_t c, const double* s) const {
    const double m = s[0] / static_cast<double>(rows);
    mean_d[c] = m;
    mean[c] = static_cast<float>(m);
  }
};

struct StoreVariance {
  int64_t rows;
  float* var;
  __device__ void operator()(int64_t c, const double* s) const { var[c] = static_cast<float>(s[0] / static_cast<double>(rows)); }
};

// The moments of matrices whose columns fill the GPU in one chunk: both passes in one kernel.
__global__ void column_moments_kernel(int64_t rows, int64_t cols, const float* x, float* mean, float* var) {
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  double s[1];
  chunk_column_sums<1>(0, rows, cols, ColumnValue{x, cols}, s);
  const double m = s[0] / static_cast<double>(rows);
  double q[1];
  chunk_column_sums<1>(
      0, rows, cols,
      [&](int64_t r, int64_t col, double* acc) {
        const double d = x[r * cols + col] - m;
        acc[0] += d * d;
      },
      q);
  if (threadIdx.y == 0 && c < cols) {
    mean[c] = static_cast<float>(m);
    var[c] = static_cast<float>(q[0] / static_cast<double>(rows));
  }
}

struct ScaleShift {
  float scale, shift;
};

// y = x * scale + shift per column, with scale and shift formed in double as the CPU forms them.
struct BatchNormApply {
  const float* x;
  int64_t cols;
  const float* mean;
  const float* var;
  float epsilon;
  const float* gamma;
  const float* beta;
  Activation act;
  float* y;
  __device__ ScaleShift column(int64_t c) const {
    const double s = (gamma ? gamma[c] : 1.0) / sqrt(static_cast<double>(var[c]) + epsilon);
    return {static_cast<float>(s), static_cast<float>((beta ? beta[c] : 0.0) - mean[c] * s)};
  }
  __device__ float normalized(int64_t i, const ScaleShift& v) const { return __fadd_rn(__fmul_rn(x[i], v.scale), v.shift); }
  __device__ void operator()(int64_t r, int64_t c, const ScaleShift& v) const {
    const int64_t i = r * cols + c;
    y[i] = backend::pointwise_activation(act, normalized(i, v));
  }
};

// dy = the gradient at the activation's input: its gradient at forward's normalised values, formed again.
struct BatchNormActivationGrad {
  BatchNormApply forward;
  float* dy;
  __device__ ScaleShift column(int64_t c) const { return forward.column(c); }
  __device__ void operator()(int64_t r, int64_t c, const ScaleShift& v) const {
    const int64_t i = r * forward.cols + c;
    dy[i] = backend::pointwise_activation_backward(forward.act, forward.normalized(i, v), dy[i]);
  }
};

// dbeta = sum dy, dgamma = sum dy * xhat, each term as the CPU forms it.
struct BatchNormParamTerms {
  const float* x;
  const float* dy;
  int64_t cols;
  const float* mean;
  const float* var;
  float epsilon;
  __device__ void operator()(int64_t r, int64_t c, double* acc) const {
    const double g = dy[r * cols + c];
    acc[0] += g;
    // x - mean rounded to float, as the CPU computes it
    acc[1] += g * static_cast<double>(__fsub_rn(x[r * cols + c], mean[c])) * (1.0 / sqrt(static_cast<double>(var[c]) + epsilon));
  }
};

struct StoreSumsAsFloat {  // sums[0] into first, sums[1] into second, where given
  float* first;
  float* second;
  __device__ void operator()(int64_t c, const double* s) const {
    if (first) first[c] = static_cast<float>(s[0]);
    if (second) second[c] = static_cast<float>(s[1]);
  }
};

struct InputGradCoefficients {
  float k, a, b;
};

// dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), as dx = k dy + a x + b per column,
// the coefficients formed in double as the CPU forms them.
struct BatchNormInputGrad {
  const float* x;
  const float* dy;
  int64_t rows, cols;
  const float* mean;
  const float* var;
  float epsilon;
  const float* gamma;
  const float* dgamma;
  const float* dbeta;
  float* dx;
  __device__ InputGradCoefficients column(int64_t c) const {
    const double n = static_cast<double>(rows);
    const double invstd = 1.0 / sqrt(static_cast<double>(var[c]) + epsilon);
    const double gi = gamma[c] * invstd, mean_dy = dbeta[c] / n, mean_dyx = dgamma[c] / n;
    return {static_cast<float>(gi), static_cast<float>(-gi * mean_dyx * invstd),
            static_cast<float>(-gi * mean_dy + gi * mean_dyx * invstd * mean[c])};
  }
  __device__ void operator()(int64_t r, int64_t c, const InputGradCoefficients& v) const {
    const int64_t i = r * cols + c;
    dx[i] = __fadd_rn(__fadd_rn(__fmul_rn(v.k, dy[i]), __fmul_rn(v.a, x[i])), v.b);
  }
};

constexpr int kRowThreads = 256;

// The sums of a block's threads in double, each thread's share first (every kRowThreads-th element),
// then the shares added in thread order by thread 0: a fixed order. Every thread gets the sums.
template <int K>
__device__ void block_sums(double (&v)[K]) {
  __shared__ double part[K][kRowThreads];
  for (int k = 0; k < K; ++k) part[k][threadIdx.x] = v[k];
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (int t = 0; t < kRowThreads; ++t) s += part[k][t];
      part[k][0] = s;
    }
  __syncthreads();
  for (int k = 0; k < K; ++k) v[k] = part[k][0];
  __syncthreads();  // part is reused by the next call
}

__global__ void layer_norm_forward_kernel(int64_t cols, const float* x, float epsilon, const float* gamma,
                                          const float* beta, float* y, float* mean, float* inv_std) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  double s[1] = {0.0};
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) s[0] += xr[c];
  block_sums<1>(s);
  const double m = s[0] / static_cast<double>(cols);
  double q[1] = {0.0};
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) q[0] += (xr[c] - m) * (xr[c] - m);
  block_sums<1>(q);
  const float mf = static_cast<float>(m), inv = layer_norm_inv_std(q[0] / static_cast<double>(cols), epsilon);
  if (threadIdx.x == 0) {
    mean[r] = mf;
    inv_std[r] = inv;
  }
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) y[r * cols + c] = layer_norm_value(xr[c], mf, inv, gamma, beta, c);
}

struct LayerNormParamTerms {
  const float* x;
  const float* dy;
  int64_t cols;
  const float* mean;
  const float* inv_std;
  __device__ void operator()(int64_t r, int64_t c, double* acc) const {
    const double g = dy[r * cols + c];
    acc[0] += g;
    acc[1] += g * (static_cast<double>(x[r * cols + c]) - mean[r]) * inv_std[r];
  }
};

__global__ void layer_norm_input_grad_kernel(int64_t cols, const float* x, const float* dy, const float* mean,
                                             const float* inv_std, const float* gamma, float* dx) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  const float* dyr = dy + r * cols;
  double s[2] = {0.0, 0.0};
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads) {
    const double g = static_cast<double>(dyr[c]) * (gamma ? gamma[c] : 1.0f);
    s[0] += g;
    s[1] += g * (static_cast<double>(xr[c]) - mean[r]) * inv_std[r];
  }
  block_sums<2>(s);
  for (int64_t c = threadIdx.x; c < cols; c += kRowThreads)
    dx[r * cols + c] = layer_norm_input_grad(xr[c], dyr[c], mean[r], inv_std[r], gamma ? gamma[c] : 1.0f, s[0], s[1],
                                             static_cast<double>(cols));
}


}  // namespace

void column_moments(cudaStream_t s, int64_t rows, int64_t cols, const float* x, float* mean, float* var,
                    double* scratch) {
  if (rows * cols == 0) return;
  if (column_chunks(rows, cols).count == 1) {
    column_moments_kernel<<<static_cast<unsigned>((cols + 31) / 32), column_threads(), 0, s>>>(rows, cols, x, mean, var);
    return;
  }
  double* mean_d = scratch + kColumnPartialDoubles;  // read by the second pass while it fills the partials
  column_sums<1>(s, rows, cols, ColumnValue{x, cols}, StoreMean{rows, mean_d, mean}, scratch);
  column_sums<1>(s, rows, cols, SquaredDeviation{x, cols, mean_d}, StoreVariance{rows, var}, scratch);
}

void batch_norm_apply(cudaStream_t s, int64_t rows, int64_t cols, const float* x, const float* mean, const float* var,
                      float epsilon, const float* gamma, const float* beta, Activation act, float* y) {
  column_map(s, rows, cols, BatchNormApply{x, cols, mean, var, epsilon, gamma, beta, act, y});
}

void batch_norm_backward(cudaStream_t s, int64_t rows, int64_t cols, const float* x, float* dy, const float* mean,
                         const float* var, float epsilon, const float* gamma, const float* beta, Activation act,
                         float* dx, float* dgamma, float* dbeta, double* scratch) {
  if (rows * cols == 0) return;
  if (act != Activation::None)
    column_map(s, rows, cols,
               BatchNormActivationGrad{{x, cols, mean, var, epsilon, gamma, beta, act, nullptr}, dy});
  column_sums<2>(s, rows, cols, BatchNormParamTerms{x, dy, cols, mean, var, epsilon}, StoreSumsAsFloat{dbeta, dgamma},
                 scratch);
  if (dx) column_map(s, rows, cols, BatchNormInputGrad{x, dy, rows, cols, mean, var, epsilon, gamma, dgamma, dbeta, dx});
}

void layer_norm_forward(cudaStream_t s, int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                        const float* beta, float* y, float* mean, float* inv_std) {
  if (rows * cols > 0)
    layer_norm_forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(cols, x, epsilon, gamma, beta, y,
                                                                                 mean, inv_std);
}

void layer_norm_backward(cudaStream_t s, int64_t rows, int64_t cols, const float* x, const float* dy,
                         const float* mean, const float* inv_std, const float* gamma, float* dx, float* dgamma,
                         float* dbeta, double* scratch) {
  if (rows * cols == 0) return;
  if (dgamma || dbeta)
    column_sums<2>(s, rows, cols, LayerNormParamTerms{x, dy, cols, mean, inv_std}, StoreSumsAsFloat{dbeta, dgamma},
                   scratch);
  if (dx)
    layer_norm_input_grad_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, s>>>(cols, x, dy, mean, inv_std,
                                                                                    gamma, dx);
}

}  // namespace kx::backend::cuda
