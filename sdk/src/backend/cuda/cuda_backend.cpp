// The CUDA backend: one stream per replica, memory from the device's stream-ordered pool, GEMMs in
// cuBLASLt, loss sums accumulated on the device and read only when taken.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_resources.hpp"
#include "backend/cuda/cuda_step_graph.hpp"
#include "backend/cuda/cuda_transfer_ring.hpp"
#include "backend/cuda/cudnn_conv.hpp"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/lt_gemm.hpp"
#include "backend/pointwise_activation_math.hpp"
#include "backend/module/module_export.hpp"

namespace kx::backend::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's recommendation for Hopper

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const BackendOptions& options)
      : device_(device), stream_(device), host_sums_(kLossSumCount) {
    // Memory handed back to the pool stays there for the next allocation instead of going back to
    // the driver: plans reallocated between fit and evaluate cost no cudaMalloc.
    check(cudaDeviceGetDefaultMemPool(&pool_, device_), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    workspace_ = allocate(kWorkspaceBytes);
    sums_ = allocate(kLossSumCount * sizeof(double));
    partials_ = allocate(kLossSumCount * sizeof(double) * kLossMaxBlocks);
    column_scratch_ = allocate(kColumnScratchDoubles * sizeof(double));
    gemm_ = std::make_unique<LtGemm>(workspace_.data<void>(), kWorkspaceBytes, column_scratch_.data<double>());
    if (options.cudnn) conv_ = CudnnConv::create(*this, device_, stream_);
    set_tf32(options.tf32);
  }

  // The members go in reverse order: the GEMM plans, the device buffers (freed on the stream), the
  // pinned sums, and last the stream, once its work has finished.
  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
  }

  std::string gemm_kernel_name() const override {
    return std::string(gemm_->tf32() ? "cublasLt (tf32)" : "cublasLt (fp32)") + (conv_ ? ", cuDNN" : "");
  }

  DeviceBuffer allocate(size_t bytes) override {
    if (bytes == 0) return {};
    use_device();
    void* p = nullptr;
    if (const cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, pool_, stream_); e != cudaSuccess) {
      cudaGetLastError();  // not the next kernel's error: a caller may go on without this memory
      check(e, "allocating device memory");
    }
    DeviceBuffer b(this, p, bytes);
    check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
    return b;
  }
  bool host_accessible() const override { return false; }
  void to_device(const void* host, size_t bytes, void* dst) override {
    if (bytes == 0) return;
    use_device();
    // From pageable memory the copy is staged before the call returns: the host may reuse its buffer.
    check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_), "copy to the device");
  }
  void to_host(const void* src, size_t bytes, void* host) override {
    if (bytes == 0) return;
    use_device();
    check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to the host");
    check(cudaStreamSynchronize(stream_), "a kernel of this step");
  }
  void fill_zero(size_t bytes, void* dst) override {
    if (bytes == 0) return;
    use_device();
    check(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
  }
  void set_tf32(bool on) override {
    gemm_->set_tf32(on);
    if (conv_) conv_->set_tf32(on);
  }
  ReplicaStream replica_stream() const { return {device_, stream_}; }

  // Every kernel; convolutions natively where cuDNN takes the geometry (a direction cuDNN has no
  // deterministic algorithm for runs as im2col and GEMMs inside CudnnConv).
  bool supports(const OpQuery& q) const override {
    if (q.op == Op::conv2d_forward || q.op == Op::conv2d_backward) return conv_ && CudnnConv::supports(q.window);
    return true;
  }

  void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
            int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep) override {
    use_device();
    gemm_->run(stream_, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, ep);
  }
  void gemm_batched(const BatchedGemm& g, const float* A, const float* B, float* C) override {
    use_device();
    gemm_->run_batched(stream_, g, A, B, C);
  }
  void activation_forward(Activation act, int64_t rows, int64_t cols, float* y) override {
    use_device();
    cuda::activation_forward(stream_, act, rows, cols, y);
    launched("activation");
  }
  void activation_backward(Activation act, int64_t rows, int64_t cols, const float* y, const float* dy,
                           float* dz) override {
    require(!activation_grad_reads_input(act), Status::Internal,
            "the gradient of activation " + std::to_string(static_cast<int>(act)) +
                " needs its input: pointwise_activation_backward");
    use_device();
    cuda::activation_backward(stream_, act, rows, cols, y, dy, dz);
    launched("activation gradient");
  }
  void bias_add(int64_t rows, int64_t cols, const float* bias, float* y) override {
    use_device();
    cuda::bias_add(stream_, rows, cols, bias, y);
    launched("bias");
  }
  void bias_grad(int64_t rows, int64_t cols, const float* dz, float* db) override {
    use_device();
    cuda::bias_grad(stream_, rows, cols, dz, db, column_scratch_.data<double>());
    launched("bias gradient");
  }
  void loss(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y, int64_t y_cols,
            const float* weights, float grad_scale, float* dout) override {
    use_device();
    cuda::loss(stream_, spec, rows, cols, out, y, y_cols, weights, grad_scale, dout, partials_.data<double>(),
               sums_.data<double>());
    launched("loss");
  }
  LossSums take_loss_sums() override {
    use_device();
    check(cudaMemcpyAsync(host_sums_.get(), sums_.data(), kLossSumCount * sizeof(double), cudaMemcpyDeviceToHost,
                          stream_),
          "reading the loss");
    check(cudaMemsetAsync(sums_.data(), 0, kLossSumCount * sizeof(double), stream_), "cudaMemsetAsync");
    check(cudaStreamSynchronize(stream_), "a kernel of this step");
    return {host_sums_[0], host_sums_[1], host_sums_[2]};
  }
  void put_back_loss_sums(const LossSums& sums) override {
    use_device();
    check(cudaStreamSynchronize(stream_), "a kernel of this step");  // host_sums_ is free again
    host_sums_[0] = sums.loss;
    host_sums_[1] = sums.correct;
    host_sums_[2] = sums.weight;
    check(cudaMemcpyAsync(sums_.data(), host_sums_.get(), kLossSumCount * sizeof(double), cudaMemcpyHostToDevice,
                          stream_),
          "handing the loss back");
    check(cudaStreamSynchronize(stream_), "handing the loss back");
  }
  void im2col(const Window2d& g, int64_t rows, const float* x, float* col) override {
    use_device();
    cuda::im2col(stream_, g, rows, x, col);
    launched("im2col");
  }
  void col2im(const Window2d& g, int64_t rows, const float* col, float* dx) override {
    use_device();
    cuda::col2im(stream_, g, rows, col, dx);
    launched("col2im");
  }
  void conv2d_forward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                      const float* bias, Activation act, float* y) override {
    use_device();
    conv_->forward(g, filters, rows, x, w, bias, act, y);
  }
  void conv2d_backward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                       const float* dz, float* dx, float* dw, float* db) override {
    use_device();
    conv_->backward(g, filters, rows, x, w, dz, dx, dw, db);
  }
  void depthwise_conv2d_forward(const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w,
                                const float* bias, float* y) override {
    use_device();
    cuda::depthwise_conv2d_forward(stream_, g, multiplier, rows, x, w, bias, y);
    launched("depthwise convolution");
  }
  void depthwise_conv2d_backward(const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w,
                                 const float* dy, float* dx, float* dw) override {
    use_device();
    cuda::depthwise_conv2d_backward(stream_, g, multiplier, rows, x, w, dy, dx, dw, column_scratch_.data<double>());
    launched("depthwise convolution gradient");
  }
  void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) override {
    use_device();
    cuda::max_pool_forward(stream_, g, rows, x, y);
    launched("max pooling");
  }
  void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy,
                         float* dx) override {
    use_device();
    cuda::max_pool_backward(stream_, g, rows, x, y, dy, dx);
    launched("max pooling gradient");
  }
  void avg_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) override {
    use_device();
    cuda::avg_pool_forward(stream_, g, rows, x, y);
    launched("average pooling");
  }
  void avg_pool_backward(const Window2d& g, int64_t rows, const float* dy, float* dx) override {
    use_device();
    cuda::avg_pool_backward(stream_, g, rows, dy, dx);
    launched("average pooling gradient");
  }
  void upsample2d_forward(const Upsample2d& u, int64_t rows, const float* x, float* y) override {
    use_device();
    cuda::upsample2d_forward(stream_, u, rows, x, y);
    launched("upsampling");
  }
  void upsample2d_backward(const Upsample2d& u, int64_t rows, const float* dy, float* dx) override {
    use_device();
    cuda::upsample2d_backward(stream_, u, rows, dy, dx);
    launched("upsampling gradient");
  }
  void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var) override {
    use_device();
    cuda::column_moments(stream_, rows, cols, x, mean, var, column_scratch_.data<double>());
    launched("batch normalisation statistics");
  }
  void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var,
                        float epsilon, const float* gamma, const float* beta, Activation act, float* y) override {
    use_device();
    cuda::batch_norm_apply(stream_, rows, cols, x, mean, var, epsilon, gamma, beta, act, y);
    launched("batch normalisation");
  }
  void batch_norm_backward(int64_t rows, int64_t cols, const float* x, float* dy, const float* mean, const float* var,
                           float epsilon, const float* gamma, const float* beta, Activation act, float* dx,
                           float* dgamma, float* dbeta) override {
    use_device();
    cuda::batch_norm_backward(stream_, rows, cols, x, dy, mean, var, epsilon, gamma, beta, act, dx, dgamma, dbeta,
                              column_scratch_.data<double>());
    launched("batch normalisation gradient");
  }
  void layer_norm_forward(int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                          const float* beta, float* y, float* mean, float* inv_std) override {
    use_device();
    cuda::layer_norm_forward(stream_, rows, cols, x, epsilon, gamma, beta, y, mean, inv_std);
    launched("layer normalisation");
  }
  void layer_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                           const float* inv_std, const float* gamma, float* dx, float* dgamma, float* dbeta) override {
    use_device();
    cuda::layer_norm_backward(stream_, rows, cols, x, dy, mean, inv_std, gamma, dx, dgamma, dbeta,
                              column_scratch_.data<double>());
    launched("layer normalisation gradient");
  }
  void causal_mask_add(int64_t count, int64_t rows, int64_t cols, float value, float* scores) override {
    use_device();
    cuda::causal_mask_add(stream_, count, rows, cols, value, scores);
    launched("causal mask");
  }
  void attention_mask_fill(int64_t rows, int64_t heads, int64_t tq, int64_t tv, const float* mask, int32_t causal,
                           float value, float* scores) override {
    use_device();
    cuda::attention_mask_fill(stream_, rows, heads, tq, tv, mask, causal, value, scores);
    launched("attention mask");
  }
  void dropout_forward(float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n,
                       const float* x, float* mask, float* y) override {
    use_device();
    cuda::dropout(stream_, rate, step_seed, stream, first, n, x, mask, y);
    launched("dropout");
  }
  void relu_general_forward(int64_t n, float slope, float max_value, float threshold, const float* x,
                            float* y) override {
    use_device();
    cuda::relu_general_forward(stream_, n, slope, max_value, threshold, x, y);
    launched("ReLU");
  }
  void relu_general_backward(int64_t n, float slope, float max_value, float threshold, const float* x, const float* dy,
                             float* dx) override {
    use_device();
    cuda::relu_general_backward(stream_, n, slope, max_value, threshold, x, dy, dx);
    launched("ReLU gradient");
  }
  void pointwise_activation_forward(Activation act, int64_t n, const float* x, float* y) override {
    require(is_valid(act) && act != Activation::Softmax, Status::Internal, "softmax is not element-wise");
    use_device();
    cuda::pointwise_activation_forward(stream_, act, n, x, y);
    launched("activation");
  }
  void pointwise_activation_backward(Activation act, int64_t n, const float* x, const float* dy, float* dx) override {
    require(is_valid(act) && act != Activation::Softmax, Status::Internal, "softmax is not element-wise");
    use_device();
    cuda::pointwise_activation_backward(stream_, act, n, x, dy, dx);
    launched("activation gradient");
  }
  void binary_forward(const BinaryShape& s, int64_t rows, const float* a, const float* b, float* out) override {
    use_device();
    cuda::binary_forward(stream_, s, rows, a, b, out);
    launched("element-wise operation");
  }
  void binary_backward(const BinaryShape& s, int64_t rows, int32_t which, const float* a, const float* b,
                       const float* dy, float* d) override {
    use_device();
    cuda::binary_backward(stream_, s, rows, which, a, b, dy, d);
    launched("element-wise operation gradient");
  }
  void scale_shift(int64_t n, float scale, float offset, const float* x, float* y) override {
    use_device();
    cuda::scale_shift(stream_, n, scale, offset, x, y);
    launched("rescaling");
  }
  void multiply(int64_t n, const float* a, const float* b, float* out) override {
    use_device();
    cuda::multiply(stream_, n, a, b, out);
    launched("multiply");
  }
  void copy(int64_t n, const float* src, float* dst) override {
    if (n == 0 || src == dst) return;
    use_device();
    check(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
          "device copy");
  }
  void add(int64_t n, const float* a, const float* b, float* out) override {
    use_device();
    cuda::add(stream_, n, a, b, out);
    launched("add");
  }
  void scaled_difference(int64_t n, float alpha, const float* a, const float* b, float* out) override {
    use_device();
    cuda::scaled_difference(stream_, n, alpha, a, b, out);
    launched("scaled difference");
  }
  void copy_columns(int64_t rows, int64_t cols, const float* src, int64_t src_ld, float* dst,
                    int64_t dst_ld) override {
    if (rows * cols == 0) return;
    use_device();
    check(cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_ld) * sizeof(float), src,
                            static_cast<size_t>(src_ld) * sizeof(float), static_cast<size_t>(cols) * sizeof(float),
                            static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream_),
          "device copy of columns");
  }
  void sgd_update(int64_t n, float* p, const float* g, float* v, const float* lr, float momentum,
                  const float* grad_factor) override {
    use_device();
    cuda::sgd(stream_, n, p, g, v, lr, momentum, grad_factor);
    launched("SGD");
  }
  void adam_update(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, float one_minus_beta1,
                   float one_minus_beta2, float epsilon, const float* grad_factor) override {
    use_device();
    cuda::adam(stream_, n, p, g, m, v, lr_t, one_minus_beta1, one_minus_beta2, epsilon, grad_factor);
    launched("Adam");
  }
  void adamw_update(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, const float* lr,
                    float weight_decay, float one_minus_beta1, float one_minus_beta2, float epsilon,
                    const float* grad_factor) override {
    use_device();
    cuda::adamw(stream_, n, p, g, m, v, lr_t, lr, weight_decay, one_minus_beta1, one_minus_beta2, epsilon, grad_factor);
    launched("AdamW");
  }
  void rmsprop_update(int64_t n, float* p, const float* g, float* v, float* m, float* a, const float* lr,
                      const RmsPropConstants& c, const float* grad_factor) override {
    use_device();
    cuda::rmsprop(stream_, n, p, g, v, m, a, lr, c, grad_factor);
    launched("RMSprop");
  }
  void round_to(Rounding r, int64_t n, const float* x, float* y) override {
    if (r == Rounding::None) return copy(n, x, y);
    use_device();
    cuda::round_to(stream_, r, n, x, y);
    launched("rounding");
  }
  void multiply_by(int64_t n, const float* factor, float* x) override {
    use_device();
    cuda::multiply_by(stream_, n, factor, x);
    launched("loss scaling");
  }
  void loss_scale_check(int64_t n, const float* g, LossScaleState* s) override {
    use_device();
    cuda::loss_scale_check(stream_, n, g, s);
    launched("loss scale check");
  }
  void loss_scale_update(LossScaleState* s) override {
    use_device();
    cuda::loss_scale_update(stream_, s);
    launched("loss scale update");
  }
  void sum_across(int64_t first, int64_t n, float* const* buffers, int count) override {
    if (count > kMaxSharedReplicas)
      fail(Status::Unsupported,
           std::to_string(count) + " replicas on one GPU; at most " + std::to_string(kMaxSharedReplicas) +
               " are supported");
    use_device();
    cuda::sum_across(stream_, first, n, buffers, count);
    launched("gradient sum");
  }
  void synchronize() override {
    use_device();
    check(cudaStreamSynchronize(stream_), "a kernel of this step");
  }
  void embedding_forward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table, float* y,
                         float* mask) override {
    use_device();
    cuda::embedding_forward(stream_, n, vocab, dim, ids, table, y, mask);
    launched("embedding");
  }
  void embedding_backward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy,
                          float* dtable) override {
    use_device();
    cuda::embedding_backward(stream_, n, vocab, dim, ids, dy, dtable);
    launched("embedding gradient");
  }
  void masking_forward(int64_t positions, int64_t features, float mask_value, const float* x, float* y,
                       float* mask) override {
    use_device();
    cuda::masking_forward(stream_, positions, features, mask_value, x, y, mask);
    launched("masking");
  }
  void masking_backward(int64_t positions, int64_t features, const float* mask, const float* dy, float* dx) override {
    use_device();
    cuda::masking_backward(stream_, positions, features, mask, dy, dx);
    launched("masking gradient");
  }
  void lstm_step_forward(const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                         const float* mask, float* c, float* h, float* y) override {
    use_device();
    cuda::lstm_step_forward(stream_, s, gates, c_prev, h_prev, mask, c, h, y);
    launched("LSTM step");
  }
  void lstm_step_backward(const RecurrentStep& s, float* gates, const float* c_prev, const float* c, const float* mask,
                          const float* dy, float* dh, float* dc) override {
    use_device();
    cuda::lstm_step_backward(stream_, s, gates, c_prev, c, mask, dy, dh, dc);
    launched("LSTM step gradient");
  }
  void gru_step_forward(const RecurrentStep& s, float* gates, const float* recurrent, const float* h_prev,
                        const float* mask, float* h, float* y) override {
    use_device();
    cuda::gru_step_forward(stream_, s, gates, recurrent, h_prev, mask, h, y);
    launched("GRU step");
  }
  void gru_step_backward(const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev,
                         const float* mask, const float* dy, float* dh) override {
    use_device();
    cuda::gru_step_backward(stream_, s, gates, recurrent, h_prev, mask, dy, dh);
    launched("GRU step gradient");
  }
  void gather_rows(const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) override {
    use_device();
    cuda::gather_rows(stream_, src, row_len, idx, n, dst);
    launched("gather");
  }
  std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) override {
    use_device();
    return make_cuda_transfer_ring(*this, device_, stream_, slots, slot_bytes);
  }

  std::unique_ptr<StepGraph> capture(const std::function<void()>& body) override {
    return capture_step(device_, stream_, body);
  }

 protected:
  void release(void* p, size_t) noexcept override {
    cudaSetDevice(device_);
    cudaFreeAsync(p, stream_);
  }

 private:
  // The current device is per host thread, and replicas run on several threads.
  void use_device() { check(cudaSetDevice(device_), "cudaSetDevice"); }
  void launched(const char* what) { check(cudaGetLastError(), what); }

  int device_;
  OwnedStream stream_;
  PinnedArray<double> host_sums_;
  cudaMemPool_t pool_ = nullptr;
  DeviceBuffer workspace_, sums_, partials_;
  DeviceBuffer column_scratch_;  // the column sums' chunks (column_sums.cuh), one kernel at a time on stream_
  std::unique_ptr<LtGemm> gemm_;
  std::unique_ptr<CudnnConv> conv_;  // null without cuDNN: convolutions go through im2col and gemm
};

int device_count(char* why, size_t why_len) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    std::snprintf(why, why_len, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  if (n == 0) std::snprintf(why, why_len, "the driver reports no GPU");
  return n;
}

void describe_device(int index, char* buf, size_t buf_len) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
    std::snprintf(buf, buf_len, "unknown device");
    return;
  }
  std::snprintf(buf, buf_len, "%s, %.1f GiB, compute capability %d.%d", p.name,
                static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), p.major, p.minor);
}

int32_t create_backend(module::ModuleError* error, int32_t index, const BackendOptions* options,
                       module::BackendHandle** backend) {
  *backend = nullptr;
  return module::guarded(error, [&] { *backend = module::to_handle(std::make_unique<CudaBackend>(index, *options)); });
}

int32_t create_collective(module::ModuleError* error, module::BackendHandle* const* replicas, int32_t count,
                          module::CollectiveHandle** collective) {
  *collective = nullptr;
  return module::guarded(error, [&] {
    std::vector<Backend*> backends;
    for (int32_t k = 0; k < count; ++k) backends.push_back(&module::backend_of(replicas[k]));
    *collective = module::to_handle(create_nccl_collective(backends.data(), count));
  });
}

int32_t nccl_available(char* why, size_t why_len) {
  const std::string reason = nccl_unavailable_reason();
  if (reason.empty()) return 1;
  std::snprintf(why, why_len, "%s", reason.c_str());
  return 0;
}

int32_t nccl_id(module::ModuleError* error, char* id, size_t id_len) {
  return module::guarded(error, [&] { nccl_unique_id(id, id_len); });
}

int32_t create_worker_collective(module::ModuleError* error, module::BackendHandle* replica, const char* id,
                                 size_t id_len, int32_t rank, int32_t size, int64_t timeout_ms,
                                 module::CollectiveHandle** collective) {
  *collective = nullptr;
  return module::guarded(error, [&] {
    require(id_len == module::kNcclIdBytes, Status::Internal, "an NCCL id of " + std::to_string(id_len) + " bytes");
    *collective = module::to_handle(
        create_nccl_worker_collective(module::backend_of(replica), id, rank, size, timeout_ms));
  });
}

constexpr module::ModuleTable kModule =
    module::make_module_table(&device_count, &describe_device, &create_backend, &create_collective, &nccl_available,
                              &nccl_id, &create_worker_collective);

}  // namespace

ReplicaStream replica_stream(Backend& be) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  if (!cuda) fail(Status::Misuse, "a collective between GPUs was given a backend of another kind");
  return cuda->replica_stream();
}
}  // namespace kx::backend::cuda

extern "C" __attribute__((visibility("default"))) const kx::backend::module::ModuleTable* kx_backend_module_v2() {
  return &kx::backend::cuda::kModule;
}
