// The one interface between the step plan and a device's kernels, private to kx. The CUDA backend is a
// separately built module that libkx reaches through a versioned C table (module/module_abi.hpp).
// Every pointer is memory of this backend's device unless said otherwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "backend/backend_ops.hpp"
#include "backend/binary_op_math.hpp"
#include "backend/rounding_math.hpp"
#include "kx/error.hpp"
#include "kx/layer.hpp"
#include "kx/loss.hpp"
#include "kx/metric.hpp"
#include "kx/strategy.hpp"

namespace kx::backend {

class Backend;

enum class Trans { No, Yes };

// Applied to each element of C as it is stored: C = act(C + bias[col]).
struct Epilogue {
  const float* bias = nullptr;
  Activation activation = Activation::None;  // None or Relu are fused; others are applied separately
  // When set: bias_grad[n] = sum over k of B[k, n] as well, for B not transposed with ldb == N (the
  // bias gradient beside a weight gradient, dW = X^T dY: the column sums of dY). Not with bias or act.
  float* bias_grad = nullptr;
  // Not None: A and B hold values of this type (the caller rounded them), whose products are exact in
  // float32 and are summed in float32; C (after bias and activation) and bias_grad are rounded to it
  // as they are stored.
  Rounding rounding = Rounding::None;
  // With a rounding: C is stored in float32 all the same, a partial result the caller sums further.
  bool keep_float32 = false;
};

// A batch of row-major GEMMs, C_b = op(A_b) op(B_b) + beta C_b as Backend::gemm computes each, for
// b = o * inner + i (o < outer, i < inner): matrix b of X starts at X + o * x_outer + i * x_inner.
// Two strides reach the heads of attention, whose matrices interleave within each sample.
struct BatchedGemm {
  Trans ta = Trans::No, tb = Trans::No;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t outer = 1, inner = 1;
  int64_t a_outer = 0, a_inner = 0, b_outer = 0, b_inner = 0, c_outer = 0, c_inner = 0;
  float beta = 0.0f;
  // Not None: A and B hold values of this type and C is rounded to it as it is stored (Epilogue's).
  Rounding rounding = Rounding::None;
};

// Keras's dynamic loss scale (LossScaleOptimizer), in the backend's memory: the step's kernels read
// and update it, so a recorded step needs no decision from the host.
struct LossScaleState {
  float scale = 32768.0f;     // the loss (its gradient) is multiplied by it before backward
  // Of the last update (loss_scale_update): 1/scale of its gradients when they were all finite, else 0
  // (the update is skipped); and 1 or 0 alike, for updates of state that is not scaled.
  float grad_factor = 0.0f;
  float applied = 0.0f;
  float finite = 1.0f;        // cleared by loss_scale_check, set again by loss_scale_update
  int64_t good_steps = 0;     // finite steps in a row since the scale last changed
  int64_t growth_steps = 2000;
};

struct LossSpec {
  LossKind kind = LossKind::SparseCategoricalCrossentropy;
  // The values given to the loss are logits (the user said so, or the output activation was folded
  // into the loss: softmax + cross-entropy, sigmoid + binary cross-entropy).
  bool logits = false;
  AccuracyKind accuracy = AccuracyKind::SparseCategorical;
  // Loss rows per sample: an output with positions (a [H, W, C] softmax) is a row per position, and
  // row r's sample weight is weights[r / positions].
  int64_t positions = 1;
  float huber_delta = 1.0f;  // Huber's
};

// A 2-D window (convolution kernel or pooling) sliding over samples stored channels-last, [h, w, c].
struct Window2d {
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t k_h = 0, k_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // zeros around the input ("same" padding)
  int64_t out_h = 0, out_w = 0;
  // Between a convolution's taps (Keras's dilation_rate): tap a reads row i * stride + a * dilation.
  // im2col, col2im and the depthwise kernels honour it; pooling windows are undilated.
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t patch() const { return k_h * k_w * channels; }
};

// RMSprop's constants (optimizer_math.hpp), float32 as Keras rounds them: rho and 1 - rho computed in
// double from the double rho.
struct RmsPropConstants {
  float rho = 0.9f, one_minus_rho = 0.1f, momentum = 0.0f, epsilon = 1e-7f;
};

// UpSampling2D: samples [in_h, in_w, channels], channels-last, made size_h x size_w times larger.
enum class Interpolation : int32_t { Nearest = 0, Bilinear = 1 };
struct Upsample2d {
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t size_h = 1, size_w = 1;
  Interpolation interpolation = Interpolation::Nearest;
};

// One time step of a recurrent layer (LSTM, GRU) over `rows` samples of `units` units. Each pointer
// of the step's kernels addresses row 0; row r of it starts `*_ld` floats further, so that the step's
// slice of a [rows, steps, ...] sequence is read in place.
struct RecurrentStep {
  int64_t rows = 0, units = 0;
  int64_t gates_ld = 0;      // the gates' pre-activations (x W + b + h U), 4 units (LSTM) or 3 (GRU)
  int64_t recurrent_ld = 0;  // GRU: h U + recurrent bias, 3 units (reset_after)
  int64_t state_ld = 0;      // h and c, previous and new
  int64_t mask_ld = 0;       // the step's mask: 1 keeps it, 0 carries the state over it
  int64_t y_ld = 0;          // the output (and its gradient, dy)
  Activation activation = Activation::Tanh;
  Activation recurrent_activation = Activation::Sigmoid;
  // Keras's zero_output_for_mask: a masked step outputs zeros (else the previous output).
  int32_t zero_masked_output = 0;
};

// What changes from one training step to the next, kept in the backend's memory and written by the
// host before each step: kernels read it there, so a step captured once (StepGraph) and replayed
// reads the values of the step it runs, not those of the step it was captured in.
struct StepValues {
  uint64_t seed = 0;          // the step's seed: layer i's dropout draws from mix_seed(seed, i)
  float learning_rate = 0;    // SGD's rate, or Adam's with the bias correction folded in
  float one = 1.0f;           // the rate of updates that are not learned (moving statistics, EMA)
  float base_learning_rate = 0;  // the rate itself, also for Adam (AdamW's weight decay scales by it)
};

// Sums over the rows the loss has seen since they were last taken.
struct LossSums {
  double loss = 0;     // sum of weight * loss
  double correct = 0;  // sum of weight * correct (accuracy's numerator)
  double weight = 0;   // sum of the weights (accuracy's denominator): the rows when unweighted

  LossSums& operator+=(const LossSums& o) {
    loss += o.loss;
    correct += o.correct;
    weight += o.weight;
    return *this;
  }
  // Accuracy, the weighted mean of correct; 0 when the weights sum to 0 (Keras's Mean, divide_no_nan).
  double accuracy() const { return weight > 0 ? correct / weight : 0.0; }
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
  // Hands the memory on without releasing it (across the module boundary); the buffer is then empty.
  void* detach() noexcept {
    owner_ = nullptr;
    bytes_ = 0;
    return std::exchange(p_, nullptr);
  }

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

// The operations a backend may be asked about (Backend::supports): one per kernel of backend_ops.hpp.
enum class Op : int32_t {
#define KX_OP_ENUMERATOR(name, params, args) name,
  KX_BACKEND_KERNELS(KX_OP_ENUMERATOR)
#undef KX_OP_ENUMERATOR
};

// What Backend::supports is asked: can this backend run op (with this geometry, for the windowed ones)?
struct OpQuery {
  Op op = Op::gemm;
  Window2d window{};
};

// How a backend is set up. Plain data: the CUDA module receives it as it is.
struct BackendOptions {
  int32_t cpu_threads = 0;           // CPU kernel threads; 0 = every core
  CpuGemm cpu_gemm = CpuGemm::Auto;  // the CPU's GEMM kernel
  CpuBf16Gemm cpu_bf16_gemm = CpuBf16Gemm::Auto;  // the CPU's bfloat16 products
  bool tf32 = true;                  // GPU: TF32 tensor cores for float32 GEMMs (as set_tf32)
  bool cudnn = true;                 // GPU: cuDNN convolutions where it is installed
};

// The operations of one device. Kernels (backend_ops.hpp) are queued in order on the backend's stream
// (the CPU runs them at once); only to_host, synchronize and take_loss_sums wait for what was queued
// before them.
class Backend {
 public:
  virtual ~Backend() = default;

#define KX_DECLARE_OPERATION(name, params, args) virtual void name params = 0;
  KX_BACKEND_KERNELS(KX_DECLARE_OPERATION)
  KX_BACKEND_DIRECT_CALLS(KX_DECLARE_OPERATION)
#undef KX_DECLARE_OPERATION

  // An operation whose output a batch normalisation alone reads, and that output's column moments
  // (column_moments's mean and var) in the same call, so that a backend can sum each block of the output
  // while it is still in cache instead of reading it all again. The same values as the two calls these
  // defaults make. gemm_column_moments: gemm(Trans::No, Trans::No, ..., beta 0, ...) with C [M, N].
  virtual void gemm_column_moments(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                                   int64_t ldb, float* C, int64_t ldc, const Epilogue& ep, float* mean, float* var) {
    gemm(Trans::No, Trans::No, M, N, K, A, lda, B, ldb, 0.0f, C, ldc, ep);
    column_moments(M, N, C, mean, var);
  }
  virtual void depthwise_conv2d_forward_moments(const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                                                const float* w, const float* bias, float* y, float* mean,
                                                float* var) {
    depthwise_conv2d_forward(g, multiplier, rows, x, w, bias, y);
    column_moments(rows * g.out_h * g.out_w, g.channels * multiplier, y, mean, var);
  }

  // Whether this backend runs q.op (for this geometry). Kernels it does not support are never called.
  virtual bool supports(const OpQuery& q) const = 0;
  virtual std::string gemm_kernel_name() const = 0;

  // Zero-filled memory of this backend's device (Status::OutOfMemory when there is none left).
  virtual DeviceBuffer allocate(size_t bytes) = 0;
  // True when the backend's memory is host memory the caller may read and write directly.
  virtual bool host_accessible() const = 0;
  // TF32 tensor cores for float32 GEMMs where the device has them (on by default, as in TensorFlow).
  virtual void set_tf32(bool on) { (void)on; }
  // The running sums of loss, which are then zero. Waits for the queued work.
  virtual LossSums take_loss_sums() = 0;
  // Makes the running sums `sums` again, what take_loss_sums returned, so that the next steps add to
  // them as if they had never been taken: an evaluate from a callback of fit hands the fit's sums back
  // bit for bit (one sum taken and added back later would round differently). Waits for the queued work.
  virtual void put_back_loss_sums(const LossSums& sums) = 0;
  // For i in [first, first + n): s = buffers[0][i] + buffers[1][i] + ... (in that order), then every
  // buffers[r][i] = s. The buffers are memory of this device (replicas that share it); their list is
  // host memory, which a recorded step keeps a copy of.
  virtual void sum_across(int64_t first, int64_t n, float* const* buffers, int count) = 0;

  // A TransferRing into this backend's memory (Status::OutOfMemory when there is not enough).
  virtual std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) = 0;

  // Records the calls `body` makes on this backend into a StepGraph instead of running them. Null when
  // this backend cannot, or could not record this body (nothing ran: the caller runs body itself); a
  // body failing for lack of memory is no recording failure: its error is rethrown.
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

inline void DeviceBuffer::reset() noexcept {
  if (owner_ && p_) owner_->release(p_, bytes_);
  owner_ = nullptr;
  p_ = nullptr;
  bytes_ = 0;
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads, CpuGemm gemm = CpuGemm::Auto,
                                          CpuBf16Gemm bf16 = CpuBf16Gemm::Auto);
// A TransferRing for a backend whose memory is host memory: the upload is a copy made at once.
std::unique_ptr<TransferRing> make_host_transfer_ring(Backend& be, int slots, size_t slot_bytes);
// The backend of one replica device: the CPU one, or one from the CUDA module (Status::Device when
// that device is not present).
std::unique_ptr<Backend> make_backend(const Device& device, const BackendOptions& options);
// The cores the CPU backend uses when its thread count is 0.
int cpu_core_count();

}  // namespace kx::backend
