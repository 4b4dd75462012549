// The CPU backend: OpenMP kernels with an explicit thread count (never OMP_NUM_THREADS alone).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/activation_math.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/gemm_dispatch.hpp"
#include "backend/cpu/rounding_kernels.hpp"
#include "backend/loss_scale_math.hpp"
#include "backend/cpu/activation_kernels.hpp"
#include "backend/cpu/binary_kernels.hpp"
#include "backend/cpu/loss_kernels.hpp"
#include "backend/cpu/normalization_kernels.hpp"
#include "backend/cpu/optimizer_kernels.hpp"
#include "backend/cpu/upsample_kernels.hpp"
#include "backend/cpu/window_kernels.hpp"
#include "backend/cpu/depthwise_kernels.hpp"
#include "backend/cpu/sequence_kernels.hpp"
#include "backend/loss_math.hpp"
#include "backend/seed_mix.hpp"
#include "kx/error.hpp"
#include "kx/tensor.hpp"

namespace kx::backend {
namespace cpu {
namespace {

// Below this much work a parallel region costs more than it saves.
constexpr int64_t kParallelElements = 1 << 15;

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, CpuGemm choice, CpuBf16Gemm bf16)
      : threads_(threads > 0 ? threads : omp_get_num_procs()), gemm_(threads_, choice, bf16) {}

  DeviceBuffer allocate(size_t bytes) override {
    if (bytes == 0) return {};
    // Whole cache lines, aligned: the SIMD kernels and for_spans rely on it.
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    require(p != nullptr, Status::OutOfMemory, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    std::memset(p, 0, rounded);
    return DeviceBuffer(this, p, bytes);
  }
  bool host_accessible() const override { return true; }
  void to_device(const void* host, size_t bytes, void* dst) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void to_host(const void* src, size_t bytes, void* host) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void fill_zero(size_t bytes, void* dst) override {
    if (bytes) std::memset(dst, 0, bytes);
  }

  // Everything but native convolutions: Conv2D layers run as im2col and GEMMs here.
  bool supports(const OpQuery& q) const override {
    return q.op != Op::conv2d_forward && q.op != Op::conv2d_backward;
  }
  void conv2d_forward(const Window2d&, int64_t, int64_t, const float*, const float*, const float*, Activation,
                      float*) override {
    fail(Status::Internal, "conv2d_forward on a backend without native convolutions");
  }
  void conv2d_backward(const Window2d&, int64_t, int64_t, const float*, const float*, const float*, float*, float*,
                       float*) override {
    fail(Status::Internal, "conv2d_backward on a backend without native convolutions");
  }

  std::string gemm_kernel_name() const override { return gemm_.kernel_name(); }

  void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
            int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep) override {
    if (ep.bias_grad) {
      require(tb == Trans::No && ldb == N && !ep.bias && ep.activation == Activation::None, Status::Internal,
              "a bias gradient beside a GEMM needs B untransposed and dense, and no other epilogue");
      bias_grad(K, N, B, ep.bias_grad);
      if (ep.rounding != Rounding::None) round_span(ep.rounding, N, ep.bias_grad, ep.bias_grad);
    }
    gemm_.run(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, ep);
  }

  // Each range of rows of C summed into the moments as soon as a thread has written it.
  void gemm_column_moments(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                           float* C, int64_t ldc, const Epilogue& ep, float* mean, float* var) override {
    if (M > 0 && ldc == N) {
      ColumnMomentSums sums(M, N, C);
      if (gemm_.run_by_row_ranges(M, N, K, A, lda, B, ldb, C, ldc, ep, sums.chunk_rows(), sums.adder()))
        return sums.finish(mean, var);
    }
    gemm_.run(Trans::No, Trans::No, M, N, K, A, lda, B, ldb, 0.0f, C, ldc, ep);
    cpu::column_moments(M, N, C, mean, var, threads_);
  }

  // The products shared between the threads, each whole on one (attention's are small but many).
  void gemm_batched(const BatchedGemm& g, const float* A, const float* B, float* C) override {
    gemm_.run_batched(g, A, B, C);
  }

  void layer_norm_forward(int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                          const float* beta, float* y, float* mean, float* inv_std) override {
    cpu::layer_norm_forward(rows, cols, x, epsilon, gamma, beta, y, mean, inv_std, threads_);
  }
  void layer_norm_backward(int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean,
                           const float* inv_std, const float* gamma, float* dx, float* dgamma, float* dbeta) override {
    cpu::layer_norm_backward(rows, cols, x, dy, mean, inv_std, gamma, dx, dgamma, dbeta, threads_);
  }
  void causal_mask_add(int64_t count, int64_t rows, int64_t cols, float value, float* scores) override {
#pragma omp parallel for num_threads(threads_) if (count * rows * cols >= kParallelElements)
    for (int64_t b = 0; b < count; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = i + 1; j < cols; ++j) scores[(b * rows + i) * cols + j] += value;
  }
  void attention_mask_fill(int64_t rows, int64_t heads, int64_t tq, int64_t tv, const float* mask, int32_t causal,
                           float value, float* scores) override {
#pragma omp parallel for num_threads(threads_) if (rows * heads * tq * tv >= kParallelElements)
    for (int64_t rh = 0; rh < rows * heads; ++rh) {
      const float* m = mask ? mask + rh / heads * tq * tv : nullptr;
      float* s = scores + rh * tq * tv;
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = 0; j < tv; ++j)
          if ((m && m[i * tv + j] == 0.0f) || (causal && j > i)) s[i * tv + j] = value;
    }
  }

  void activation_forward(Activation act, int64_t rows, int64_t cols, float* y) override {
    const int64_t n = rows * cols;
    switch (act) {
      case Activation::None: return;
      case Activation::Relu:
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
        for (int64_t i = 0; i < n; ++i) y[i] = relu(y[i]);
        return;
      case Activation::Sigmoid:
#pragma omp parallel for num_threads(threads_) if (n >= kParallelElements)
        for (int64_t i = 0; i < n; ++i) y[i] = sigmoid(y[i]);
        return;
      case Activation::Tanh:
#pragma omp parallel for num_threads(threads_) if (n >= kParallelElements)
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
        return;
      case Activation::Relu6:
      case Activation::Silu:
      case Activation::HardSilu:
      case Activation::HardSigmoid:
      case Activation::Gelu:
      case Activation::GeluTanh:
      case Activation::Elu:
      case Activation::LeakyRelu:
      case Activation::Softplus:
        pointwise_activation_forward(act, n, y, y);
        return;
      case Activation::Softmax:
        for_row_spans(rows, cols, [&](int64_t b, int64_t e) { softmax_rows(e - b, cols, y + b * cols); });
        return;
    }
  }

  void activation_backward(Activation act, int64_t rows, int64_t cols, const float* y, const float* dy,
                           float* dz) override {
    const int64_t n = rows * cols;
    switch (act) {
      case Activation::None:
        if (dz != dy) copy(n, dy, dz);
        return;
      case Activation::Relu:
        for_spans(n, [&](int64_t b, int64_t e) { relu_backward_span(e - b, y + b, dy + b, dz + b); });
        return;
      case Activation::Sigmoid:
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
        for (int64_t i = 0; i < n; ++i) dz[i] = sigmoid_backward(y[i], dy[i]);
        return;
      case Activation::Tanh:
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
        for (int64_t i = 0; i < n; ++i) dz[i] = tanh_backward(y[i], dy[i]);
        return;
      default:
        fail(Status::Internal, std::string("the gradient of ") + activation_name(act) +
                                   " needs its input: pointwise_activation_backward");
      case Activation::Softmax:
        for_row_spans(rows, cols, [&](int64_t b, int64_t e) {
          softmax_backward_rows(e - b, cols, y + b * cols, dy + b * cols, dz + b * cols);
        });
        return;
    }
  }

  void bias_add(int64_t rows, int64_t cols, const float* bias, float* y) override {
#pragma omp parallel for num_threads(threads_) schedule(static) if (rows * cols >= kParallelElements)
    for (int64_t r = 0; r < rows; ++r) {
      float* row = y + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }

  void bias_grad(int64_t rows, int64_t cols, const float* dz, float* db) override {
    // Column sums over fixed chunks of rows, in parallel, then the chunks' sums added in chunk order:
    // the result does not depend on the thread count.
    constexpr int64_t kChunkRows = 512;
    const int64_t chunks = std::max<int64_t>(1, (rows + kChunkRows - 1) / kChunkRows);
    if (workspace_.size() < static_cast<size_t>(chunks * cols)) workspace_.resize(static_cast<size_t>(chunks * cols));
    float* parts = workspace_.data();
#pragma omp parallel for num_threads(threads_) schedule(static) if (chunks > 1 && rows * cols >= kParallelElements)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      float* sum = parts + ch * cols;
      std::fill(sum, sum + cols, 0.0f);
      for (int64_t r = ch * kChunkRows; r < std::min(rows, (ch + 1) * kChunkRows); ++r) {
        const float* row = dz + r * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) sum[j] += row[j];
      }
    }
    std::copy(parts, parts + cols, db);
    for (int64_t ch = 1; ch < chunks; ++ch) {
      const float* sum = parts + ch * cols;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) db[j] += sum[j];
    }
  }

  void loss(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y, int64_t y_cols,
            const float* weights, float grad_scale, float* dout) override {
    sums_ += loss_rows(spec, rows, cols, out, y, y_cols, weights, grad_scale, dout);
  }
  LossSums take_loss_sums() override { return std::exchange(sums_, LossSums{}); }
  void put_back_loss_sums(const LossSums& sums) override { sums_ = sums; }

  void im2col(const Window2d& g, int64_t rows, const float* x, float* col) override {
    cpu::im2col(g, rows, x, col, threads_);
  }
  void col2im(const Window2d& g, int64_t rows, const float* col, float* dx) override {
    cpu::col2im(g, rows, col, dx, threads_);
  }
  void depthwise_conv2d_forward(const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w,
                                const float* bias, float* y) override {
    cpu::depthwise_conv2d_forward(g, multiplier, rows, x, w, bias, y, threads_);
  }
  void depthwise_conv2d_backward(const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w,
                                 const float* dy, float* dx, float* dw) override {
    float* partials = nullptr;
    if (dw) {
      const auto n = static_cast<size_t>(cpu::depthwise_filter_partials(g, multiplier, rows));
      if (workspace_.size() < n) workspace_.resize(n);
      partials = workspace_.data();
    }
    cpu::depthwise_conv2d_backward(g, multiplier, rows, x, w, dy, dx, dw, partials, threads_);
  }
  void max_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) override {
    cpu::max_pool_forward(g, rows, x, y, threads_);
  }
  void max_pool_backward(const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy,
                         float* dx) override {
    cpu::max_pool_backward(g, rows, x, y, dy, dx, threads_);
  }

  void avg_pool_forward(const Window2d& g, int64_t rows, const float* x, float* y) override {
    cpu::avg_pool_forward(g, rows, x, y, threads_);
  }
  void avg_pool_backward(const Window2d& g, int64_t rows, const float* dy, float* dx) override {
    cpu::avg_pool_backward(g, rows, dy, dx, threads_);
  }
  void upsample2d_forward(const Upsample2d& u, int64_t rows, const float* x, float* y) override {
    cpu::upsample2d_forward(u, rows, x, y, threads_);
  }
  void upsample2d_backward(const Upsample2d& u, int64_t rows, const float* dy, float* dx) override {
    cpu::upsample2d_backward(u, rows, dy, dx, threads_);
  }
  void depthwise_conv2d_forward_moments(const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                                        const float* w, const float* bias, float* y, float* mean,
                                        float* var) override {
    const int64_t positions = rows * g.out_h * g.out_w, cols = g.channels * multiplier;
    if (positions == 0) return column_moments(0, cols, y, mean, var);
    ColumnMomentSums sums(positions, cols, y);
    cpu::depthwise_conv2d_forward_by_ranges(g, multiplier, rows, x, w, bias, y, threads_, sums.chunk_rows(),
                                            sums.adder());
    sums.finish(mean, var);
  }
  void column_moments(int64_t rows, int64_t cols, const float* x, float* mean, float* var) override {
    cpu::column_moments(rows, cols, x, mean, var, threads_);
  }
  void batch_norm_apply(int64_t rows, int64_t cols, const float* x, const float* mean, const float* var,
                        float epsilon, const float* gamma, const float* beta, Activation act, float* y) override {
    cpu::batch_norm_apply(rows, cols, x, mean, var, epsilon, gamma, beta, act, y, threads_);
  }
  void batch_norm_backward(int64_t rows, int64_t cols, const float* x, float* dy, const float* mean, const float* var,
                           float epsilon, const float* gamma, const float* beta, Activation act, float* dx,
                           float* dgamma, float* dbeta) override {
    cpu::batch_norm_backward(rows, cols, x, dy, mean, var, epsilon, gamma, beta, act, dx, dgamma, dbeta, threads_);
  }

  void dropout_forward(float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n,
                       const float* x, float* mask, float* y) override {
    const uint64_t seed = mix_seed(*step_seed, stream);
    for_spans(n, [&](int64_t b, int64_t e) { dropout_span(rate, seed, first + b, e - b, x + b, mask + b, y + b); });
  }

  void relu_general_forward(int64_t n, float slope, float max_value, float threshold, const float* x,
                            float* y) override {
    for_spans(n, [&](int64_t b, int64_t e) { relu_general_span(e - b, slope, max_value, threshold, x + b, y + b); });
  }
  void relu_general_backward(int64_t n, float slope, float max_value, float threshold, const float* x, const float* dy,
                             float* dx) override {
    for_spans(n, [&](int64_t b, int64_t e) {
      relu_general_backward_span(e - b, slope, max_value, threshold, x + b, dy + b, dx + b);
    });
  }
  void pointwise_activation_forward(Activation act, int64_t n, const float* x, float* y) override {
    require_pointwise(act);
    for_spans(n, [&](int64_t b, int64_t e) { pointwise_activation_span(act, e - b, x + b, y + b); });
  }
  void pointwise_activation_backward(Activation act, int64_t n, const float* x, const float* dy, float* dx) override {
    require_pointwise(act);
    for_spans(n, [&](int64_t b, int64_t e) { pointwise_activation_backward_span(act, e - b, x + b, dy + b, dx + b); });
  }
  void binary_forward(const BinaryShape& s, int64_t rows, const float* a, const float* b, float* out) override {
    cpu::binary_forward(s, rows, a, b, out, threads_);
  }
  void binary_backward(const BinaryShape& s, int64_t rows, int32_t which, const float* a, const float* b,
                       const float* dy, float* d) override {
    cpu::binary_backward(s, rows, which, a, b, dy, d, threads_);
  }
  void scale_shift(int64_t n, float scale, float offset, const float* x, float* y) override {
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + offset;
  }

  void multiply(int64_t n, const float* a, const float* b, float* out) override {
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
  }

  void copy(int64_t n, const float* src, float* dst) override {
    if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }

  void add(int64_t n, const float* a, const float* b, float* out) override {
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }

  void scaled_difference(int64_t n, float alpha, const float* a, const float* b, float* out) override {
    for (int64_t i = 0; i < n; ++i) out[i] = alpha * (a[i] - b[i]);
  }

  void copy_columns(int64_t rows, int64_t cols, const float* src, int64_t src_ld, float* dst,
                    int64_t dst_ld) override {
#pragma omp parallel for num_threads(threads_) if (rows * cols >= kParallelElements)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * dst_ld, src + r * src_ld, static_cast<size_t>(cols) * sizeof(float));
  }

  void sgd_update(int64_t n, float* p, const float* g, float* v, const float* lr_in, float momentum,
                  const float* grad_factor) override {
    const float lr = *lr_in;
    if (grad_factor && *grad_factor == 0.0f) return;  // a loss-scaled step whose gradients overflowed
    const float f = grad_factor ? *grad_factor : 1.0f;
    if (v && momentum != 0.0f) {
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) {
        v[i] = momentum * v[i] - lr * (g[i] * f);
        p[i] += v[i];
      }
    } else {
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] * f);
    }
  }

  void adam_update(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, float one_minus_beta1,
                   float one_minus_beta2, float epsilon, const float* grad_factor) override {
    if (grad_factor && *grad_factor == 0.0f) return;
    const AdamStep step{*lr_t, one_minus_beta1, one_minus_beta2, epsilon, grad_factor ? *grad_factor : 1.0f};
    for_spans(n, [&](int64_t b, int64_t e) { adam_span(e - b, p + b, g + b, m + b, v + b, step); });
  }

  void adamw_update(int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, const float* lr,
                    float weight_decay, float one_minus_beta1, float one_minus_beta2, float epsilon,
                    const float* grad_factor) override {
    if (grad_factor && *grad_factor == 0.0f) return;
    const AdamStep step{*lr_t, one_minus_beta1, one_minus_beta2, epsilon, grad_factor ? *grad_factor : 1.0f};
    const float rate = *lr;
    // The decay and the step block by block, so that the decayed block is still in cache for the step.
    constexpr int64_t kBlock = 4096;
    for_spans(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t k = std::min(kBlock, e - i);
        weight_decay_span(k, p + i, rate, weight_decay);
        adam_span(k, p + i, g + i, m + i, v + i, step);
      }
    });
  }

  void rmsprop_update(int64_t n, float* p, const float* g, float* v, float* m, float* a, const float* lr,
                      const RmsPropConstants& c, const float* grad_factor) override {
    if (grad_factor && *grad_factor == 0.0f) return;
    const float rate = *lr, f = grad_factor ? *grad_factor : 1.0f;
    for_spans(n, [&](int64_t b, int64_t e) {
      rmsprop_span(e - b, p + b, g + b, v + b, m ? m + b : nullptr, a ? a + b : nullptr, c, rate, f);
    });
  }

  void round_to(Rounding r, int64_t n, const float* x, float* y) override {
    for_spans(n, [&](int64_t b, int64_t e) { round_span(r, e - b, x + b, y + b); });
  }

  void multiply_by(int64_t n, const float* factor, float* x) override {
    const float f = *factor;
#pragma omp parallel for simd num_threads(threads_) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) x[i] *= f;
  }

  void loss_scale_check(int64_t n, const float* g, LossScaleState* s) override {
    if (s->finite != 0.0f && !all_finite(n, g)) s->finite = 0.0f;
  }
  void loss_scale_update(LossScaleState* s) override { update_loss_scale(*s); }

  void sum_across(int64_t first, int64_t n, float* const* buffers, int count) override {
    float* sum = buffers[0] + first;
    for (int r = 1; r < count; ++r) {
      const float* part = buffers[r] + first;
      for (int64_t i = 0; i < n; ++i) sum[i] += part[i];
    }
    for (int r = 1; r < count; ++r) std::copy(sum, sum + n, buffers[r] + first);
  }
  void synchronize() override {}

  std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) override {
    return make_host_transfer_ring(*this, slots, slot_bytes);
  }

  void embedding_forward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table, float* y,
                         float* mask) override {
    cpu::embedding_forward(n, vocab, dim, ids, table, y, mask, threads_);
  }
  void embedding_backward(int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy,
                          float* dtable) override {
    cpu::embedding_backward(n, vocab, dim, ids, dy, dtable, threads_);
  }
  void masking_forward(int64_t positions, int64_t features, float mask_value, const float* x, float* y,
                       float* mask) override {
    cpu::masking_forward(positions, features, mask_value, x, y, mask, threads_);
  }
  void masking_backward(int64_t positions, int64_t features, const float* mask, const float* dy, float* dx) override {
    cpu::masking_backward(positions, features, mask, dy, dx, threads_);
  }
  void lstm_step_forward(const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                         const float* mask, float* c, float* h, float* y) override {
    cpu::lstm_step_forward(s, gates, c_prev, h_prev, mask, c, h, y, threads_);
  }
  void lstm_step_backward(const RecurrentStep& s, float* gates, const float* c_prev, const float* c, const float* mask,
                          const float* dy, float* dh, float* dc) override {
    cpu::lstm_step_backward(s, gates, c_prev, c, mask, dy, dh, dc, threads_);
  }
  void gru_step_forward(const RecurrentStep& s, float* gates, const float* recurrent, const float* h_prev,
                        const float* mask, float* h, float* y) override {
    cpu::gru_step_forward(s, gates, recurrent, h_prev, mask, h, y, threads_);
  }
  void gru_step_backward(const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev,
                         const float* mask, const float* dy, float* dh) override {
    cpu::gru_step_backward(s, gates, recurrent, h_prev, mask, dy, dh, threads_);
  }

  void gather_rows(const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst) override {
#pragma omp parallel for num_threads(threads_) if (n * row_len >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * row_len, src + idx[i] * row_len, static_cast<size_t>(row_len) * sizeof(float));
  }

 protected:
  void release(void* p, size_t) noexcept override { std::free(p); }

 private:
  static constexpr size_t kAlignment = 64;

  static void require_pointwise(Activation act) {
    require(is_valid(act) && act != Activation::Softmax, Status::Internal,
            "pointwise activation kernels take element-wise activations, not " + std::to_string(static_cast<int>(act)));
  }
  // fn(begin, end) over one span per thread, in whole cache lines so no two threads write the same
  // line; a single span below the parallel threshold.
  template <class Fn>
  void for_spans(int64_t n, Fn fn) {
    const int parts = n >= kParallelElements ? threads_ : 1;
    const int64_t chunk = ((n + parts - 1) / parts + 15) / 16 * 16;
#pragma omp parallel for num_threads(parts) if (parts > 1)
    for (int t = 0; t < parts; ++t) {
      const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
      if (end > begin) fn(begin, end);
    }
  }

  // fn(first_row, end_row) over one span of whole rows per thread; a single span below the threshold.
  template <class Fn>
  void for_row_spans(int64_t rows, int64_t cols, Fn fn) {
    const int parts = rows * cols >= kParallelElements ? static_cast<int>(std::min<int64_t>(threads_, rows)) : 1;
#pragma omp parallel for num_threads(parts) if (parts > 1)
    for (int t = 0; t < parts; ++t) {
      const int64_t begin = rows * t / parts, end = rows * (t + 1) / parts;
      if (end > begin) fn(begin, end);
    }
  }

  int threads_;
  GemmDispatch gemm_;
  FloatBuffer workspace_;  // partial sums of bias and depthwise filter gradients
  LossSums sums_;
};

}  // namespace
}  // namespace cpu

int cpu_core_count() { return omp_get_num_procs(); }

std::unique_ptr<Backend> make_cpu_backend(int num_threads, CpuGemm gemm, CpuBf16Gemm bf16) {
  return std::make_unique<cpu::CpuBackend>(num_threads, gemm, bf16);
}

}  // namespace kx::backend
