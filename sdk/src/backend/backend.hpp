// The one interface between the step plan and a device's kernels. Private to kx and versioned, because
// the CUDA backend is a separately built module. Every pointer is memory of this backend's device.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "kx/error.hpp"
#include "kx/layer.hpp"
#include "kx/loss.hpp"
#include "kx/metric.hpp"
#include "kx/strategy.hpp"

namespace kx::backend {

inline constexpr int kInterfaceVersion = 5;

class Backend;


enum class Trans { No, Yes };

// Applied to each element of C as it is stored: C = act(C + bias[col]).
struct Epilogue {
  const float* bias = nullptr;
  Activation activation = Activation::None;  // None or Relu are fused; others are applied separately
  // When set: bias_grad[n] = sum over k of B[k, n] as well, for B not transposed with ldb == N (the
  // bias gradient beside a weight gradient, dW = X^T dY: the column sums of dY). Not with bias or act.
  float* bias_grad = nullptr;
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

// What changes from one training step to the next, kept in the backend's memory and written by the
// host before each step: kernels read it there, so a step captured once (StepGraph) and replayed
// reads the values of the step it runs, not those of the step it was captured in.
struct StepValues {
  uint64_t seed = 0;          // the step's seed: layer i's dropout draws from mix_seed(seed, i)
  float learning_rate = 0;    // SGD's rate, or Adam's with the bias correction folded in
  float one = 1.0f;           // the rate of updates that are not learned (moving statistics, EMA)
};

// Sums over the rows the loss has seen since they were last taken.
struct LossSums {
  double loss = 0;
  double correct = 0;
};

// Memory of one backend's device, allocated by it and handed back to it when destroyed; the backend
// must outlive its buffers.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* owner, void* p, size_t bytes) : owner_(owner), p_(p), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : owner_(std::exchange(o.owner_, nullptr)), p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      owner_ = std::exchange(o.owner_, nullptr);
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  inline void reset() noexcept;

  template <class T = float>
  T* data() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  int64_t floats() const { return static_cast<int64_t>(bytes_ / sizeof(float)); }
  bool empty() const { return bytes_ == 0; }

 private:
  Backend* owner_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A recorded sequence of one backend's calls (a CUDA graph). launch() queues them again, with the
// arguments they were recorded with: memory they point at is read when they run.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void launch() = 0;
};

// Copies from host memory into a device on a queue of their own, overlapped with compute: how the
// batches of a dataset too large for device memory reach the device. `slots` pairs of a host buffer
// (page-locked on a GPU) and a device buffer, slot_bytes each; the device buffers are contiguous, slot
// s at s * slot_bytes. A slot's turn: wait_host_writable, fill host_slot, upload, the compute that
// reads it, release.
class TransferRing {
 public:
  virtual ~TransferRing() = default;
  virtual void* host_slot(int slot) = 0;
  virtual void* device_slots() = 0;
  // Returns once host_slot(slot) may be written again: its last upload has finished.
  virtual void wait_host_writable(int slot) = 0;
  // Queues the copy of the first `bytes` of host_slot(slot) into its device slot, after the compute
  // released the slot; compute queued after this call waits for the copy.
  virtual void upload(int slot, size_t bytes) = 0;
  // The compute queued so far is the last to read the device slot before its next upload.
  virtual void release(int slot) = 0;
};

// Every kernel call is queued in order on the backend's stream (the CPU runs it at once); only
// to_host and take_loss_sums wait for what was queued before them.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string gemm_kernel_name() const = 0;

  // Zero-filled memory of this backend's device (Status::OutOfMemory when there is none left).
  virtual DeviceBuffer allocate(size_t bytes) = 0;
  // True when the backend's memory is host memory the caller may read and write directly.
  virtual bool host_accessible() const = 0;
  // Copies between host memory and this device; to_host returns once the data is on the host.
  virtual void to_device(const void* host, size_t bytes, void* dst) = 0;
  virtual void to_host(const void* src, size_t bytes, void* host) = 0;
  virtual void fill_zero(size_t bytes, void* dst) = 0;
  // TF32 tensor cores for float32 GEMMs where the device has them (on by default, as in TensorFlow).
  virtual void set_tf32(bool on) { (void)on; }

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
  // Loss of rows samples (outputs cols per sample, labels y with y_cols per sample), added to the
  // backend's running sums. The gradient of (sum of per-sample losses) * grad_scale goes to dout when
  // it is not null.
  virtual void loss(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y,
                    int64_t y_cols, float grad_scale, float* dout) = 0;
  // The running sums of loss, which are then zero. Waits for the queued work.
  virtual LossSums take_loss_sums() = 0;
  // col[(r * out_h + i) * out_w + j, (a * k_w + b) * channels + c] = x of sample r at
  // (i * stride_h + a - pad_top, j * stride_w + b - pad_left, c), or 0 outside the input.
  virtual void im2col(const Window2d& g, int64_t rows, const float* x, float* col) = 0;
  // The adjoint of im2col: dx (overwritten) = the sum of every column entry at its input position.
  virtual void col2im(const Window2d& g, int64_t rows, const float* col, float* dx) = 0;
  // Convolution run natively (cuDNN): y [rows, out_h, out_w, filters] = act(conv(x, w) + bias), w in
  // Keras's layout [k_h, k_w, channels, filters], act None or Relu. has_conv2d says whether this backend
  // runs this geometry so; where it does not, layers use im2col and gemm and never call these.
  virtual bool has_conv2d(const Window2d& g) const {
    (void)g;
    return false;
  }
  virtual void conv2d_forward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                              const float* bias, Activation act, float* y);
  // From dz = dL/d(the convolution plus bias): dx, dw and db, each overwritten and each may be null.
  virtual void conv2d_backward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                               const float* dz, float* dx, float* dw, float* db);
  // Max over each window (no padding), channel by channel.
  virtual void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) = 0;
  // dx (overwritten): each window's dy goes to the first position holding its maximum.
  virtual void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy,
                                 float* dx) = 0;
  // Mean over each window (no padding), channel by channel.
  virtual void avg_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) = 0;
  // dx (overwritten): each window's dy shared equally between its positions.
  virtual void avg_pool_backward(const Window2d& g, int64_t rows, const float* dy, float* dx) = 0;
  // Per column c of x [rows, cols]: mean[c] and the biased variance var[c] (batch normalisation's
  // statistics over every sample and position of a channel).
  virtual void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var) = 0;
  // y[r, c] = gamma[c] * (x[r, c] - mean[c]) / sqrt(var[c] + epsilon) + beta[c]; gamma may be null (1),
  // beta null (0).
  virtual void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var,
                                float epsilon, const float* gamma, const float* beta, float* y) = 0;
  // The gradients of batch_norm_apply with mean and var the moments of x itself (training mode):
  // dgamma, dbeta (overwritten) and, when dx is not null, dx (overwritten; it may not alias dy).
  virtual void batch_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                                   const float* var, float epsilon, const float* gamma, float* dx, float* dgamma,
                                   float* dbeta) = 0;
  // Inverted dropout: mask[i] = 0 or 1/(1-rate) from a counter-based RNG keyed by
  // (mix_seed(*step_seed, stream), first + i), so a replica holding rows from `first` on draws the
  // same mask as one device holding the whole batch. step_seed is this backend's memory.
  virtual void dropout_forward(float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n,
                               const float* x, float* mask, float* y) = 0;
  // out[i] = a[i] * b[i]
  virtual void multiply(int64_t n, const float* a, const float* b, float* out) = 0;
  virtual void copy(int64_t n, const float* src, float* dst) = 0;
  // out[i] = a[i] + b[i]; out may alias a or b.
  virtual void add(int64_t n, const float* a, const float* b, float* out) = 0;
  // out[i] = alpha * (a[i] - b[i]).
  virtual void scaled_difference(int64_t n, float alpha, const float* a, const float* b, float* out) = 0;
  // dst[r * dst_ld + c] = src[r * src_ld + c] for r < rows, c < cols (a block of columns).
  virtual void copy_columns(int64_t rows, int64_t cols, const float* src, int64_t src_ld, float* dst,
                            int64_t dst_ld) = 0;
  // p -= lr * g, or with momentum: v = momentum * v - lr * g; p += v (Keras). The rate is read from
  // this backend's memory when the update runs (StepValues).
  virtual void sgd_update(int64_t n, float* p, const float* g, float* v, const float* lr, float momentum) = 0;
  // Keras Adam with bias correction folded into lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t), read
  // from this backend's memory when the update runs.
  virtual void adam_update(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, float beta1,
                           float beta2, float epsilon) = 0;
  // For i in [first, first + n): s = buffers[0][i] + buffers[1][i] + ... (in that order), then every
  // buffers[r][i] = s. The buffers are memory of this device (replicas that share it).
  virtual void sum_across(int64_t first, int64_t n, float* const* buffers, int count) = 0;
  // Returns when every call queued before has finished.
  virtual void synchronize() = 0;
  // dst[i, :] = src[idx[i], :] for i < n, rows of row_len floats; idx is memory of this backend too.
  virtual void gather_rows(const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) = 0;

  // A TransferRing into this backend's memory (Status::OutOfMemory when there is not enough).
  virtual std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) = 0;

  // Records the calls `body` makes on this backend into a StepGraph instead of running them. Null when
  // this backend cannot, or could not record this body (nothing ran: the caller runs body itself).
  // body may not wait for the device (to_host, synchronize, take_loss_sums) nor allocate.
  virtual std::unique_ptr<StepGraph> capture(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }

 protected:
  friend class DeviceBuffer;
  // Takes back memory from allocate.
  virtual void release(void* p, size_t bytes) noexcept = 0;
};

inline void Backend::conv2d_forward(const Window2d&, int64_t, int64_t, const float*, const float*, const float*,
                                    Activation, float*) {
  fail(Status::Internal, "conv2d_forward on a backend without native convolutions");
}
inline void Backend::conv2d_backward(const Window2d&, int64_t, int64_t, const float*, const float*, const float*,
                                     float*, float*, float*) {
  fail(Status::Internal, "conv2d_backward on a backend without native convolutions");
}

inline void DeviceBuffer::reset() noexcept {
  if (owner_ && p_) owner_->release(p_, bytes_);
  owner_ = nullptr;
  p_ = nullptr;
  bytes_ = 0;
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads, CpuGemm gemm = CpuGemm::Auto);
// A TransferRing for a backend whose memory is host memory: the upload is a copy made at once.
std::unique_ptr<TransferRing> make_host_transfer_ring(Backend& be, int slots, size_t slot_bytes);
// The backend of one replica device: the CPU one, or one from the CUDA module (Status::Device when
// that device is not present).
std::unique_ptr<Backend> make_backend(const Device& device, int cpu_threads, CpuGemm gemm);
// The cores the CPU backend uses when its thread count is 0.
int cpu_core_count();

}  // namespace kx::backend
