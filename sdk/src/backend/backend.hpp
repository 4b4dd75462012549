// The one interface between the step plan and a device's kernels. Private to kx and versioned, because
// the CUDA backend is a separately built module. Every pointer is memory of this backend's device.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kx/layer.hpp"
#include "kx/loss.hpp"
#include "kx/metric.hpp"
#include "kx/strategy.hpp"

namespace kx::backend {

inline constexpr int kInterfaceVersion = 1;

enum class Trans { No, Yes };

// Applied to each element of C as it is stored: C = act(C + bias[col]).
struct Epilogue {
  const float* bias = nullptr;
  Activation activation = Activation::None;  // None or Relu are fused; others are applied separately
};

struct LossSpec {
  LossKind kind = LossKind::SparseCategoricalCrossentropy;
  // The values given to the loss are logits (the user said so, or the output activation was folded
  // into the loss: softmax + cross-entropy, sigmoid + binary cross-entropy).
  bool logits = false;
  AccuracyKind accuracy = AccuracyKind::SparseCategorical;
};

// A 2-D window (convolution kernel or pooling) sliding over samples stored channels-last, [h, w, c].
struct Window2d {
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t k_h = 0, k_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // zeros around the input ("same" padding)
  int64_t out_h = 0, out_w = 0;
  int64_t patch() const { return k_h * k_w * channels; }
};

// Sums over the rows of one call, added to what the caller already holds.
struct LossSums {
  double loss = 0;
  double correct = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string gemm_kernel_name() const = 0;

  // C[M,N] = op(A)[M,K] * op(B)[K,N] + beta * C, row-major, then the epilogue.
  virtual void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep) = 0;
  // In place over rows x cols (softmax over each row).
  virtual void activation_forward(Activation act, int64_t rows, int64_t cols, float* y) = 0;
  // dz = dL/dz from the activation's output y and dy = dL/dy; dz may alias dy.
  virtual void activation_backward(Activation act, int64_t rows, int64_t cols, const float* y, const float* dy,
                                   float* dz) = 0;
  // db[c] = sum over rows of dz[r, c].
  virtual void bias_grad(int64_t rows, int64_t cols, const float* dz, float* db) = 0;
  // Loss of rows samples (outputs cols per sample, labels y with y_cols per sample). The gradient of
  // (sum of per-sample losses) * grad_scale goes to dout when it is not null.
  virtual void loss(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y,
                    int64_t y_cols, float grad_scale, float* dout, LossSums* sums) = 0;
  // col[(r * out_h + i) * out_w + j, (a * k_w + b) * channels + c] = x of sample r at
  // (i * stride_h + a - pad_top, j * stride_w + b - pad_left, c), or 0 outside the input.
  virtual void im2col(const Window2d& g, int64_t rows, const float* x, float* col) = 0;
  // The adjoint of im2col: dx (overwritten) = the sum of every column entry at its input position.
  virtual void col2im(const Window2d& g, int64_t rows, const float* col, float* dx) = 0;
  // Max over each window (no padding), channel by channel.
  virtual void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) = 0;
  // dx (overwritten): each window's dy goes to the first position holding its maximum.
  virtual void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy,
                                 float* dx) = 0;
  // Inverted dropout: mask[i] = 0 or 1/(1-rate) from a counter-based RNG keyed by (seed, first + i), so
  // a replica holding rows from `first` on draws the same mask as one device holding the whole batch.
  virtual void dropout_forward(float rate, uint64_t seed, int64_t first, int64_t n, const float* x, float* mask,
                               float* y) = 0;
  // out[i] = a[i] * b[i]
  virtual void multiply(int64_t n, const float* a, const float* b, float* out) = 0;
  virtual void copy(int64_t n, const float* src, float* dst) = 0;
  // p -= lr * g, or with momentum: v = momentum * v - lr * g; p += v (Keras).
  virtual void sgd_update(int64_t n, float* p, const float* g, float* v, float lr, float momentum) = 0;
  // Keras Adam with bias correction folded into lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t).
  virtual void adam_update(int64_t n, float* p, const float* g, float* m, float* v, float lr_t, float beta1,
                           float beta2, float epsilon) = 0;
  // dst[i, :] = src[idx[i], :] for i < n, rows of row_len floats.
  virtual void gather_rows(const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) = 0;
};

std::unique_ptr<Backend> make_cpu_backend(int num_threads, CpuGemm gemm = CpuGemm::Auto);
// The cores the CPU backend uses when its thread count is 0.
int cpu_core_count();

}  // namespace kx::backend
