#include "backend/recording_backend.hpp"

#include <utility>
#include <vector>

#include "kx/error.hpp"

namespace kx::backend {
namespace {

using Call = std::function<void(Backend&)>;

class RecordedGraph final : public StepGraph {
 public:
  RecordedGraph(Backend& target, std::vector<Call> calls) : target_(target), calls_(std::move(calls)) {}
  void launch() override {
    for (const Call& c : calls_) c(target_);
  }

 private:
  Backend& target_;
  std::vector<Call> calls_;
};

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string gemm_kernel_name() const override { return inner_->gemm_kernel_name(); }
  DeviceBuffer allocate(size_t bytes) override {
    no_wait("allocate");
    return inner_->allocate(bytes);
  }
  bool host_accessible() const override { return inner_->host_accessible(); }
  // A copy from host memory cannot be recorded: CUDA refuses pageable memory in a capture.
  void to_device(const void* host, size_t bytes, void* dst) override {
    no_wait("copy host memory");
    inner_->to_device(host, bytes, dst);
  }
  void to_host(const void* src, size_t bytes, void* host) override {
    no_wait("wait for a copy to the host");
    inner_->to_host(src, bytes, host);
  }
  void fill_zero(size_t bytes, void* dst) override {
    run([=](Backend& b) { b.fill_zero(bytes, dst); });
  }
  void set_tf32(bool on) override { inner_->set_tf32(on); }

  void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
            int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep) override {
    run([=](Backend& b) { b.gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, ep); });
  }
  void activation_forward(Activation act, int64_t rows, int64_t cols, float* y) override {
    run([=](Backend& b) { b.activation_forward(act, rows, cols, y); });
  }
  void activation_backward(Activation act, int64_t rows, int64_t cols, const float* y, const float* dy,
                           float* dz) override {
    run([=](Backend& b) { b.activation_backward(act, rows, cols, y, dy, dz); });
  }
  void bias_grad(int64_t rows, int64_t cols, const float* dz, float* db) override {
    run([=](Backend& b) { b.bias_grad(rows, cols, dz, db); });
  }
  void loss(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y, int64_t y_cols,
            float grad_scale, float* dout) override {
    run([=](Backend& b) { b.loss(spec, rows, cols, out, y, y_cols, grad_scale, dout); });
  }
  LossSums take_loss_sums() override {
    no_wait("read the loss");
    return inner_->take_loss_sums();
  }
  void im2col(const Window2d& g, int64_t rows, const float* x, float* col) override {
    run([=](Backend& b) { b.im2col(g, rows, x, col); });
  }
  void col2im(const Window2d& g, int64_t rows, const float* col, float* dx) override {
    run([=](Backend& b) { b.col2im(g, rows, col, dx); });
  }
  bool has_conv2d(const Window2d& g) const override { return inner_->has_conv2d(g); }
  void conv2d_forward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                      const float* bias, Activation act, float* y) override {
    run([=](Backend& b) { b.conv2d_forward(g, filters, rows, x, w, bias, act, y); });
  }
  void conv2d_backward(const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w,
                       const float* dz, float* dx, float* dw, float* db) override {
    run([=](Backend& b) { b.conv2d_backward(g, filters, rows, x, w, dz, dx, dw, db); });
  }
  void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) override {
    run([=](Backend& b) { b.max_pool_forward(g, rows, x, y); });
  }
  void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy,
                         float* dx) override {
    run([=](Backend& b) { b.max_pool_backward(g, rows, x, y, dy, dx); });
  }
  void avg_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) override {
    run([=](Backend& b) { b.avg_pool_forward(g, rows, x, y); });
  }
  void avg_pool_backward(const Window2d& g, int64_t rows, const float* dy, float* dx) override {
    run([=](Backend& b) { b.avg_pool_backward(g, rows, dy, dx); });
  }
  void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var) override {
    run([=](Backend& b) { b.column_moments(rows, cols, x, mean, var); });
  }
  void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var,
                        float epsilon, const float* gamma, const float* beta, float* y) override {
    run([=](Backend& b) { b.batch_norm_apply(rows, cols, x, mean, var, epsilon, gamma, beta, y); });
  }
  void batch_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                           const float* var, float epsilon, const float* gamma, float* dx, float* dgamma,
                           float* dbeta) override {
    run([=](Backend& b) { b.batch_norm_backward(rows, cols, x, dy, mean, var, epsilon, gamma, dx, dgamma, dbeta); });
  }
  void dropout_forward(float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n,
                       const float* x, float* mask, float* y) override {
    run([=](Backend& b) { b.dropout_forward(rate, step_seed, stream, first, n, x, mask, y); });
  }
  void multiply(int64_t n, const float* a, const float* bb, float* out) override {
    run([=](Backend& b) { b.multiply(n, a, bb, out); });
  }
  void copy(int64_t n, const float* src, float* dst) override {
    run([=](Backend& b) { b.copy(n, src, dst); });
  }
  void add(int64_t n, const float* a, const float* bb, float* out) override {
    run([=](Backend& b) { b.add(n, a, bb, out); });
  }
  void scaled_difference(int64_t n, float alpha, const float* a, const float* bb, float* out) override {
    run([=](Backend& b) { b.scaled_difference(n, alpha, a, bb, out); });
  }
  void copy_columns(int64_t rows, int64_t cols, const float* src, int64_t src_ld, float* dst,
                    int64_t dst_ld) override {
    run([=](Backend& b) { b.copy_columns(rows, cols, src, src_ld, dst, dst_ld); });
  }
  void sgd_update(int64_t n, float* p, const float* g, float* v, const float* lr, float momentum) override {
    run([=](Backend& b) { b.sgd_update(n, p, g, v, lr, momentum); });
  }
  void adam_update(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, float beta1,
                   float beta2, float epsilon) override {
    run([=](Backend& b) { b.adam_update(n, p, g, m, v, lr_t, beta1, beta2, epsilon); });
  }
  void sum_across(int64_t first, int64_t n, float* const* buffers, int count) override {
    std::vector<float*> list(buffers, buffers + count);
    run([=](Backend& b) { b.sum_across(first, n, list.data(), count); });
  }
  void synchronize() override {
    no_wait("wait for the device");
    inner_->synchronize();
  }
  void gather_rows(const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) override {
    run([=](Backend& b) { b.gather_rows(src, row_len, idx, n, dst); });
  }

  std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) override {
    no_wait("allocate");
    return inner_->make_transfer_ring(slots, slot_bytes);
  }

  std::unique_ptr<StepGraph> capture(const std::function<void()>& body) override {
    if (recording_) return nullptr;
    recording_ = true;
    calls_.clear();
    try {
      body();
    } catch (...) {
      recording_ = false;
      calls_.clear();
      return nullptr;  // as a failed CUDA capture: nothing ran, the caller runs body itself
    }
    recording_ = false;
    return std::make_unique<RecordedGraph>(*inner_, std::exchange(calls_, {}));
  }

 protected:
  // Memory comes from inner_, which takes it back itself.
  void release(void*, size_t) noexcept override {}

 private:
  template <class F>
  void run(F&& call) {
    if (recording_)
      calls_.emplace_back(std::forward<F>(call));
    else
      call(*inner_);
  }
  void no_wait(const char* what) const {
    if (recording_) fail(Status::Misuse, std::string("a captured step cannot ") + what);
  }

  std::unique_ptr<Backend> inner_;
  bool recording_ = false;
  std::vector<Call> calls_;
};

}  // namespace

std::unique_ptr<Backend> make_recording_backend(std::unique_ptr<Backend> inner) {
  return std::make_unique<RecordingBackend>(std::move(inner));
}

}  // namespace kx::backend
