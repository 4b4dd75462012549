// Element-wise kernels: activations, dropout, optimizers, gathers. Each element's result depends only
// on its inputs, so they match the CPU backend whatever the launch shape.
#include <cmath>

#include "backend/activation_math.hpp"
#include "backend/binary_op_math.hpp"
#include "backend/cuda/column_map.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/loss_math.hpp"
#include "backend/optimizer_math.hpp"
#include "backend/pointwise_activation_math.hpp"
#include "backend/seed_mix.hpp"

namespace kx::backend::cuda {
namespace {

__global__ void relu_kernel(int64_t n, float* y) {
  KX_GRID_STRIDE(i, n) y[i] = relu(y[i]);
}
__global__ void sigmoid_kernel(int64_t n, float* y) {
  KX_GRID_STRIDE(i, n) y[i] = sigmoid(y[i]);
}
__global__ void tanh_kernel(int64_t n, float* y) {
  KX_GRID_STRIDE(i, n) y[i] = tanhf(y[i]);
}

// One warp per row: rows of a classifier's output are short.
__global__ void softmax_kernel(int64_t rows, int64_t cols, float* y) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  float* v = y + warp * cols;
  float mx = -INFINITY;
  for (int64_t j = lane; j < cols; j += 32) mx = fmaxf(mx, v[j]);
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0;
  for (int64_t j = lane; j < cols; j += 32) sum += (v[j] = expf(v[j] - mx));
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.0f / sum;
  for (int64_t j = lane; j < cols; j += 32) v[j] *= inv;
}

__global__ void relu_backward_kernel(int64_t n, const float* y, const float* dy, float* dz) {
  KX_GRID_STRIDE(i, n) dz[i] = relu_backward(y[i], dy[i]);
}
__global__ void sigmoid_backward_kernel(int64_t n, const float* y, const float* dy, float* dz) {
  KX_GRID_STRIDE(i, n) dz[i] = sigmoid_backward(y[i], dy[i]);
}
__global__ void tanh_backward_kernel(int64_t n, const float* y, const float* dy, float* dz) {
  KX_GRID_STRIDE(i, n) dz[i] = tanh_backward(y[i], dy[i]);
}
__global__ void copy_kernel(int64_t n, const float* src, float* dst) {
  KX_GRID_STRIDE(i, n) dst[i] = src[i];
}
__global__ void softmax_backward_kernel(int64_t rows, int64_t cols, const float* y, const float* dy, float* dz) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* yr = y + warp * cols;
  const float* dyr = dy + warp * cols;
  float* dzr = dz + warp * cols;
  float dot = 0;
  for (int64_t j = lane; j < cols; j += 32) dot += dyr[j] * yr[j];
  for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  for (int64_t j = lane; j < cols; j += 32) dzr[j] = yr[j] * (dyr[j] - dot);
}

struct BiasRelu {  // y[r, c] (+ bias[c]), then ReLU where asked
  int64_t ld;
  float* y;
  const float* bias;
  bool relu;
  __device__ float column(int64_t c) const { return bias ? bias[c] : 0.0f; }
  __device__ void operator()(int64_t r, int64_t c, float b) const {
    const float v = y[r * ld + c] + b;
    y[r * ld + c] = relu ? backend::relu(v) : v;
  }
};

// The draws of the CPU backend's dropout: the mask of element i depends on (key, i) only.
__global__ void dropout_kernel(float rate, float keep_scale, const uint64_t* step_seed, uint64_t stream, int64_t first,
                               int64_t n, const float* x, float* mask, float* y) {
  const uint64_t key = mix_seed(*step_seed, stream);
  KX_GRID_STRIDE(i, n) {
    const float u = dropout_uniform(key, static_cast<uint64_t>(first + i));
    const float m = u >= rate ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void transpose_kernel(int64_t rows, int64_t cols, const float* src, float* dst) {
  KX_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    dst[c * rows + r] = src[i];
  }
}

__global__ void relu_general_kernel(int64_t n, float slope, float max_value, float threshold, const float* x,
                                    float* y) {
  KX_GRID_STRIDE(i, n) y[i] = relu_general(x[i], slope, max_value, threshold);
}
__global__ void relu_general_backward_kernel(int64_t n, float slope, float max_value, float threshold, const float* x,
                                             const float* dy, float* dx) {
  KX_GRID_STRIDE(i, n) dx[i] = backend::relu_general_backward(x[i], dy[i], slope, max_value, threshold);
}
// One kernel per activation (a template), so that none tests which activation it is per element.
template <Activation A>
__global__ void pointwise_activation_kernel(int64_t n, const float* x, float* y) {
  KX_GRID_STRIDE(i, n) y[i] = pointwise_activation(A, x[i]);
}
template <Activation A>
__global__ void pointwise_activation_backward_kernel(int64_t n, const float* x, const float* dy, float* dx) {
  KX_GRID_STRIDE(i, n) dx[i] = backend::pointwise_activation_backward(A, x[i], dy[i]);
}

__global__ void binary_forward_kernel(BinaryShape shape, int64_t size, int64_t n, const float* a, const float* b,
                                      float* out) {
  KX_GRID_STRIDE(i, n) out[i] = binary::forward_at(shape, a, b, i / size, i % size);
}
// One thread per element of the operand: its broadcast positions summed in the CPU's order.
__global__ void binary_backward_kernel(BinaryShape shape, int32_t which, int64_t size, int64_t n, const float* a,
                                       const float* b, const float* dy, float* d) {
  KX_GRID_STRIDE(i, n) d[i] = binary::gradient_at(shape, which, a, b, dy, i / size, i % size);
}

#define KX_EACH_POINTWISE_ACTIVATION(X) \
  X(None) X(Relu) X(Sigmoid) X(Tanh) X(Relu6) X(Silu) X(HardSilu) X(HardSigmoid) X(Gelu) X(GeluTanh) X(Elu) \
  X(LeakyRelu) X(Softplus)

__global__ void scale_shift_kernel(int64_t n, float scale, float offset, const float* x, float* y) {
  KX_GRID_STRIDE(i, n) y[i] = add_rn(mul_rn(x[i], scale), offset);
}

__global__ void multiply_kernel(int64_t n, const float* a, const float* b, float* out) {
  KX_GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

struct BiasAdd {
  int64_t cols;
  const float* bias;
  float* y;
  __device__ float column(int64_t c) const { return bias[c]; }
  __device__ void operator()(int64_t r, int64_t c, float b) const { y[r * cols + c] = __fadd_rn(y[r * cols + c], b); }
};

__global__ void add_kernel(int64_t n, const float* a, const float* b, float* out) {
  KX_GRID_STRIDE(i, n) out[i] = __fadd_rn(a[i], b[i]);
}

__global__ void scaled_difference_kernel(int64_t n, float alpha, const float* a, const float* b, float* out) {
  KX_GRID_STRIDE(i, n) out[i] = __fmul_rn(alpha, __fsub_rn(a[i], b[i]));
}

// The gradient factor of a loss-scaled step (1 without one); 0 skips the update.
__device__ inline float factor_of(const float* grad_factor) { return grad_factor ? *grad_factor : 1.0f; }

__global__ void sgd_kernel(int64_t n, float* p, const float* g, const float* lr_in, const float* grad_factor) {
  const float lr = *lr_in, f = factor_of(grad_factor);
  if (f == 0.0f) return;
  KX_GRID_STRIDE(i, n) p[i] = __fsub_rn(p[i], __fmul_rn(lr, __fmul_rn(g[i], f)));
}
__global__ void sgd_momentum_kernel(int64_t n, float* p, const float* g, float* v, const float* lr_in,
                                    float momentum, const float* grad_factor) {
  const float lr = *lr_in, f = factor_of(grad_factor);
  if (f == 0.0f) return;
  KX_GRID_STRIDE(i, n) {
    const float vi = __fsub_rn(__fmul_rn(momentum, v[i]), __fmul_rn(lr, __fmul_rn(g[i], f)));
    v[i] = vi;
    p[i] = __fadd_rn(p[i], vi);
  }
}

// The CPU's Adam expression, rounded step by step as it is (no fused multiply-add).
__global__ void adam_kernel(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_in,
                            float one_minus_b1, float one_minus_b2, float epsilon, const float* grad_factor) {
  const float lr_t = *lr_in, f = factor_of(grad_factor);
  if (f == 0.0f) return;
  KX_GRID_STRIDE(i, n) {
    const float gi = __fmul_rn(g[i], f);
    const float mi = __fadd_rn(m[i], __fmul_rn(one_minus_b1, __fsub_rn(gi, m[i])));
    const float vi = __fadd_rn(v[i], __fmul_rn(one_minus_b2, __fsub_rn(__fmul_rn(gi, gi), v[i])));
    m[i] = mi;
    v[i] = vi;
    p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(mi, lr_t), __fadd_rn(__fsqrt_rn(vi), epsilon)));
  }
}

__global__ void adamw_kernel(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t_in,
                             const float* lr_in, float weight_decay, float one_minus_b1, float one_minus_b2,
                             float epsilon, const float* grad_factor) {
  const float lr_t = *lr_t_in, lr = *lr_in, f = factor_of(grad_factor);
  if (f == 0.0f) return;
  KX_GRID_STRIDE(i, n) {
    float mi = m[i], vi = v[i];
    p[i] = adam_step(weight_decayed(p[i], weight_decay, lr), __fmul_rn(g[i], f), mi, vi, lr_t, one_minus_b1,
                     one_minus_b2, epsilon);
    m[i] = mi;
    v[i] = vi;
  }
}

__global__ void rmsprop_kernel(int64_t n, float* p, const float* g, float* v, float* m, float* a, const float* lr_in,
                               RmsPropConstants c, const float* grad_factor) {
  const float lr = *lr_in, f = factor_of(grad_factor);
  if (f == 0.0f) return;
  KX_GRID_STRIDE(i, n) p[i] = rmsprop_step(p[i], __fmul_rn(g[i], f), v[i], m ? m + i : nullptr, a ? a + i : nullptr, c, lr);
}

__global__ void gather_rows_kernel(const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) {
  KX_GRID_STRIDE(i, n * row_len) {
    const int64_t r = i / row_len, k = i % row_len;
    dst[i] = src[idx[r] * row_len + k];
  }
}

struct BufferList {
  float* p[kMaxSharedReplicas];
};

// Replica order, as the CPU sums: bitwise the same result.
__global__ void sum_across_kernel(int64_t first, int64_t n, BufferList b, int count) {
  KX_GRID_STRIDE(i, n) {
    const int64_t at = first + i;
    float s = b.p[0][at];
    for (int r = 1; r < count; ++r) s = __fadd_rn(s, b.p[r][at]);
    for (int r = 0; r < count; ++r) b.p[r][at] = s;
  }
}

unsigned warp_blocks(int64_t rows) { return static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads); }

}  // namespace

void activation_forward(cudaStream_t s, Activation act, int64_t rows, int64_t cols, float* y) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  switch (act) {
    case Activation::None: return;
    case Activation::Relu: relu_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, y); return;
    case Activation::Sigmoid: sigmoid_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, y); return;
    case Activation::Tanh: tanh_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, y); return;
    case Activation::Softmax: softmax_kernel<<<warp_blocks(rows), kThreads, 0, s>>>(rows, cols, y); return;
    default: pointwise_activation_forward(s, act, n, y, y); return;  // the activations after softmax
  }
}

void activation_backward(cudaStream_t s, Activation act, int64_t rows, int64_t cols, const float* y, const float* dy,
                         float* dz) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  switch (act) {
    case Activation::None:
      if (dz != dy) copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, dy, dz);
      return;
    case Activation::Relu: relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, y, dy, dz); return;
    case Activation::Sigmoid: sigmoid_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, y, dy, dz); return;
    case Activation::Tanh: tanh_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, y, dy, dz); return;
    case Activation::Softmax:
      softmax_backward_kernel<<<warp_blocks(rows), kThreads, 0, s>>>(rows, cols, y, dy, dz);
      return;
    default: return;  // the activations after softmax need their input: refused by the caller
  }
}

void pointwise_activation_forward(cudaStream_t s, Activation act, int64_t n, const float* x, float* y) {
  if (n == 0) return;
  switch (act) {
#define KX_FORWARD_CASE(a) \
  case Activation::a: pointwise_activation_kernel<Activation::a><<<blocks_for(n), kThreads, 0, s>>>(n, x, y); return;
    KX_EACH_POINTWISE_ACTIVATION(KX_FORWARD_CASE)
#undef KX_FORWARD_CASE
    case Activation::Softmax: return;  // refused by the caller
  }
}

void pointwise_activation_backward(cudaStream_t s, Activation act, int64_t n, const float* x, const float* dy,
                                   float* dx) {
  if (n == 0) return;
  switch (act) {
#define KX_BACKWARD_CASE(a)                                                                                 \
  case Activation::a:                                                                                      \
    pointwise_activation_backward_kernel<Activation::a><<<blocks_for(n), kThreads, 0, s>>>(n, x, dy, dx); \
    return;
    KX_EACH_POINTWISE_ACTIVATION(KX_BACKWARD_CASE)
#undef KX_BACKWARD_CASE
    case Activation::Softmax: return;  // refused by the caller
  }
}

void binary_forward(cudaStream_t s, const BinaryShape& shape, int64_t rows, const float* a, const float* b,
                    float* out) {
  const int64_t size = binary::size_of(shape.dims, shape.rank), n = rows * size;
  if (n) binary_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(shape, size, n, a, b, out);
}
void binary_backward(cudaStream_t s, const BinaryShape& shape, int64_t rows, int32_t which, const float* a,
                     const float* b, const float* dy, float* d) {
  const int64_t size = binary::size_of(which == 0 ? shape.a_dims : shape.b_dims, shape.rank), n = rows * size;
  if (n) binary_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(shape, which, size, n, a, b, dy, d);
}

void bias_relu(cudaStream_t s, int64_t rows, int64_t cols, int64_t ld, float* y, const float* bias, bool relu) {
  if (rows * cols == 0) return;
  column_map(s, rows, cols, BiasRelu{ld, y, bias, relu});
}

void dropout(cudaStream_t s, float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n,
             const float* x, float* mask, float* y) {
  if (n == 0) return;
  const float keep_scale = 1.0f / (1.0f - rate);
  dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(rate, keep_scale, step_seed, stream, first, n, x, mask, y);
}

void transpose(cudaStream_t s, int64_t rows, int64_t cols, const float* src, float* dst) {
  if (rows * cols > 0) transpose_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(rows, cols, src, dst);
}

void relu_general_forward(cudaStream_t s, int64_t n, float slope, float max_value, float threshold, const float* x,
                          float* y) {
  if (n) relu_general_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, slope, max_value, threshold, x, y);
}
void relu_general_backward(cudaStream_t s, int64_t n, float slope, float max_value, float threshold, const float* x,
                           const float* dy, float* dx) {
  if (n) relu_general_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, slope, max_value, threshold, x, dy, dx);
}
void scale_shift(cudaStream_t s, int64_t n, float scale, float offset, const float* x, float* y) {
  if (n) scale_shift_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, scale, offset, x, y);
}

void multiply(cudaStream_t s, int64_t n, const float* a, const float* b, float* out) {
  if (n) multiply_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, a, b, out);
}

void bias_add(cudaStream_t s, int64_t rows, int64_t cols, const float* bias, float* y) {
  column_map(s, rows, cols, BiasAdd{cols, bias, y});
}

void add(cudaStream_t s, int64_t n, const float* a, const float* b, float* out) {
  if (n) add_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, a, b, out);
}

void scaled_difference(cudaStream_t s, int64_t n, float alpha, const float* a, const float* b, float* out) {
  if (n) scaled_difference_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, alpha, a, b, out);
}

void sgd(cudaStream_t s, int64_t n, float* p, const float* g, float* v, const float* lr, float momentum,
         const float* grad_factor) {
  if (n == 0) return;
  if (v && momentum != 0.0f)
    sgd_momentum_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, p, g, v, lr, momentum, grad_factor);
  else
    sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, p, g, lr, grad_factor);
}

void adam(cudaStream_t s, int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t,
          float one_minus_beta1, float one_minus_beta2, float epsilon, const float* grad_factor) {
  if (n)
    adam_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, p, g, m, v, lr_t, one_minus_beta1, one_minus_beta2, epsilon,
                                                   grad_factor);
}

void adamw(cudaStream_t s, int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, const float* lr,
           float weight_decay, float one_minus_beta1, float one_minus_beta2, float epsilon, const float* grad_factor) {
  if (n)
    adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, p, g, m, v, lr_t, lr, weight_decay, one_minus_beta1,
                                                    one_minus_beta2, epsilon, grad_factor);
}

void rmsprop(cudaStream_t s, int64_t n, float* p, const float* g, float* v, float* m, float* a, const float* lr,
             const RmsPropConstants& c, const float* grad_factor) {
  if (n) rmsprop_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, p, g, v, m, a, lr, c, grad_factor);
}

void sum_across(cudaStream_t s, int64_t first, int64_t n, float* const* buffers, int count) {
  if (n <= 0) return;
  BufferList list{};
  for (int r = 0; r < count; ++r) list.p[r] = buffers[r];
  sum_across_kernel<<<blocks_for(n), kThreads, 0, s>>>(first, n, list, count);
}

void gather_rows(cudaStream_t s, const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) {
  if (n * row_len > 0) gather_rows_kernel<<<blocks_for(n * row_len), kThreads, 0, s>>>(src, row_len, idx, n, dst);
}

}  // namespace kx::backend::cuda
