// Launchers of the CUDA backend's kernels. Each queues its work on `stream` and returns; launch
// errors are read by the caller (cudaGetLastError). Sums are in a fixed order: results do not depend
// on the launch configuration's timing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cuda {

void activation_forward(cudaStream_t s, Activation act, int64_t rows, int64_t cols, float* y);
void activation_backward(cudaStream_t s, Activation act, int64_t rows, int64_t cols, const float* y, const float* dy,
                         float* dz);
// y[r, c] += bias[c] and/or relu, for a GEMM whose epilogue cuBLASLt could not fuse.
void bias_relu(cudaStream_t s, int64_t rows, int64_t cols, int64_t ld, float* y, const float* bias, bool relu);
// The column sums' scratch (column_sums.cuh), in doubles: up to kColumnMaxSums sums per column and
// chunk of rows, then one double per column that a later pass reads (the mean, for the variance).
inline constexpr int64_t kColumnMaxBlocks = 2048;  // of the first kernel: chunks x blocks of 32 columns
inline constexpr int kColumnMaxSums = 9;  // a 3x3 depthwise filter's taps in one pass
inline constexpr int64_t kColumnPartialDoubles = kColumnMaxSums * kColumnMaxBlocks * 32;
inline constexpr int64_t kColumnScratchDoubles = kColumnPartialDoubles + kColumnMaxBlocks * 32;
// db[c] = the sum of dz's column c, in double in a fixed order (column_sums.cuh), rounded to float;
// scratch holds kColumnScratchDoubles.
void bias_grad(cudaStream_t s, int64_t rows, int64_t cols, const float* dz, float* db, double* scratch);
// A GEMM with K = 0 over rows x cols with leading dimension ld: beta C, bias and ReLU as the CPU stores
// them (bitwise).
void empty_sum_gemm(cudaStream_t s, int64_t rows, int64_t cols, int64_t ld, float beta, const float* bias, bool relu,
                    float* x);

// Per-row losses into partials[block] (loss, correct, weight: kLossSumCount doubles), then added in block
// order to sums[0..2].
inline constexpr int kLossMaxBlocks = 1024;
inline constexpr int kLossSumCount = 3;
void loss(cudaStream_t s, const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y,
          int64_t y_cols, const float* weights, float grad_scale, float* dout, double* partials, double* sums);

void im2col(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, float* col);
void col2im(cudaStream_t s, const Window2d& g, int64_t rows, const float* col, float* dx);
// Depthwise convolution (depthwise_kernels.cu), as the operations of backend_ops.hpp; the filter
// gradient's scratch holds kColumnScratchDoubles, as for bias_grad.
void depthwise_conv2d_forward(cudaStream_t s, const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                              const float* w, const float* bias, float* y);
void depthwise_conv2d_backward(cudaStream_t s, const Window2d& g, int64_t multiplier, int64_t rows, const float* x,
                               const float* w, const float* dy, float* dx, float* dw, double* scratch);
void max_pool_forward(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, float* y);
void max_pool_backward(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, const float* y,
                       const float* dy, float* dx);
void avg_pool_forward(cudaStream_t s, const Window2d& g, int64_t rows, const float* x, float* y);
void avg_pool_backward(cudaStream_t s, const Window2d& g, int64_t rows, const float* dy, float* dx);
void upsample2d_forward(cudaStream_t s, const Upsample2d& u, int64_t rows, const float* x, float* y);
void upsample2d_backward(cudaStream_t s, const Upsample2d& u, int64_t rows, const float* dy, float* dx);

// Batch normalisation: per-column sums in double, in a fixed order (column_sums.cuh); scratch holds
// kColumnScratchDoubles, as for bias_grad.
void column_moments(cudaStream_t s, int64_t rows, int64_t cols, const float* x, float* mean, float* var,
                    double* scratch);
void batch_norm_apply(cudaStream_t s, int64_t rows, int64_t cols, const float* x, const float* mean, const float* var,
                      float epsilon, const float* gamma, const float* beta, Activation act, float* y);
// With act other than None, dy (act's output gradient) becomes the gradient at act's input first.
void batch_norm_backward(cudaStream_t s, int64_t rows, int64_t cols, const float* x, float* dy, const float* mean,
                         const float* var, float epsilon, const float* gamma, const float* beta, Activation act,
                         float* dx, float* dgamma, float* dbeta, double* scratch);

// Layer normalisation (normalization_kernels.cu): a block per row, its sums in double in a fixed order.
void layer_norm_forward(cudaStream_t s, int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma,
                        const float* beta, float* y, float* mean, float* inv_std);
void layer_norm_backward(cudaStream_t s, int64_t rows, int64_t cols, const float* x, const float* dy,
                         const float* mean, const float* inv_std, const float* gamma, float* dx, float* dgamma,
                         float* dbeta, double* scratch);
// scores[b, i, j] += value where j > i (attention_kernels.cu).
void causal_mask_add(cudaStream_t s, int64_t count, int64_t rows, int64_t cols, float value, float* scores);
// scores[r, h, i, j] = value where mask[r, i, j] == 0 or (causal) j > i (attention_kernels.cu).
void attention_mask_fill(cudaStream_t s, int64_t rows, int64_t heads, int64_t tq, int64_t tv, const float* mask,
                         int32_t causal, float value, float* scores);

// The pointers to rates and seeds are device memory, read when the kernel runs (a replayed graph).
void dropout(cudaStream_t s, float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n,
             const float* x, float* mask, float* y);
// dst [cols, rows] = src [rows, cols] transposed.
void transpose(cudaStream_t s, int64_t rows, int64_t cols, const float* src, float* dst);
void relu_general_forward(cudaStream_t s, int64_t n, float slope, float max_value, float threshold, const float* x,
                          float* y);
void relu_general_backward(cudaStream_t s, int64_t n, float slope, float max_value, float threshold, const float* x,
                           const float* dy, float* dx);
// y = act(x), dx = dy * act'(x) for an element-wise activation (not softmax).
void pointwise_activation_forward(cudaStream_t s, Activation act, int64_t n, const float* x, float* y);
void pointwise_activation_backward(cudaStream_t s, Activation act, int64_t n, const float* x, const float* dy,
                                   float* dx);
// out = a op b with broadcasting; d = the gradient of operand `which` (binary_op_math.hpp).
void binary_forward(cudaStream_t s, const BinaryShape& shape, int64_t rows, const float* a, const float* b,
                    float* out);
void binary_backward(cudaStream_t s, const BinaryShape& shape, int64_t rows, int32_t which, const float* a,
                     const float* b, const float* dy, float* d);
void scale_shift(cudaStream_t s, int64_t n, float scale, float offset, const float* x, float* y);
void multiply(cudaStream_t s, int64_t n, const float* a, const float* b, float* out);
void bias_add(cudaStream_t s, int64_t rows, int64_t cols, const float* bias, float* y);
void add(cudaStream_t s, int64_t n, const float* a, const float* b, float* out);
void scaled_difference(cudaStream_t s, int64_t n, float alpha, const float* a, const float* b, float* out);
// grad_factor: null, or device memory g is multiplied by; 0 there skips the update (loss scaling).
void sgd(cudaStream_t s, int64_t n, float* p, const float* g, float* v, const float* lr, float momentum,
         const float* grad_factor);
void adamw(cudaStream_t s, int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, const float* lr,
           float weight_decay, float one_minus_beta1, float one_minus_beta2, float epsilon, const float* grad_factor);
void rmsprop(cudaStream_t s, int64_t n, float* p, const float* g, float* v, float* m, float* a, const float* lr,
             const RmsPropConstants& c, const float* grad_factor);
void adam(cudaStream_t s, int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t,
          float one_minus_beta1, float one_minus_beta2, float epsilon, const float* grad_factor);
// As Backend::sum_across, for up to kMaxSharedReplicas buffers.
inline constexpr int kMaxSharedReplicas = 16;
void sum_across(cudaStream_t s, int64_t first, int64_t n, float* const* buffers, int count);
// The sequence layers (sequence_kernels.cu), as the operations of backend_ops.hpp.
void embedding_forward(cudaStream_t s, int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table,
                       float* y, float* mask);
void embedding_backward(cudaStream_t s, int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy,
                        float* dtable);
void masking_forward(cudaStream_t s, int64_t positions, int64_t features, float mask_value, const float* x, float* y,
                     float* mask);
void masking_backward(cudaStream_t s, int64_t positions, int64_t features, const float* mask, const float* dy,
                      float* dx);
void lstm_step_forward(cudaStream_t st, const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev,
                       const float* mask, float* c, float* h, float* y);
void lstm_step_backward(cudaStream_t st, const RecurrentStep& s, float* gates, const float* c_prev, const float* c,
                        const float* mask, const float* dy, float* dh, float* dc);
void gru_step_forward(cudaStream_t st, const RecurrentStep& s, float* gates, const float* recurrent,
                      const float* h_prev, const float* mask, float* h, float* y);
void gru_step_backward(cudaStream_t st, const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev,
                       const float* mask, const float* dy, float* dh);
void gather_rows(cudaStream_t s, const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst);

// Mixed precision (mixed_precision_kernels.cu), as the operations of backend_ops.hpp: rows x cols
// values with a leading dimension ld rounded in place (rounding_math.hpp); x *= *factor; the loss
// scale's finiteness check and update (loss_scale_math.hpp).
void round_to(cudaStream_t s, Rounding r, int64_t n, const float* x, float* y);
void round_rows(cudaStream_t s, Rounding r, int64_t rows, int64_t cols, int64_t ld, float* x);
void multiply_by(cudaStream_t s, int64_t n, const float* factor, float* x);
void loss_scale_check(cudaStream_t s, int64_t n, const float* g, LossScaleState* state);
void loss_scale_update(cudaStream_t s, LossScaleState* state);

}  // namespace kx::backend::cuda
