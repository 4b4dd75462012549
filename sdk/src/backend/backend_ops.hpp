// The operations of a backend, described once. Each line is X(name, (typed parameters), (arguments)),
// and everything that repeats an operation is generated from these lists: the pure virtual in Backend,
// the recording backend's forwarding, the Op enumerators of Backend::supports, and the CUDA module's C
// table with both of its sides (module/module_abi.hpp). A new operation is one line here plus its
// implementation in each backend (the compiler asks for every one of them).
//
// Parameters are plain data only: scalars, enums, pointers and standard-layout structs (a const
// reference to one crosses the module boundary as a pointer); module/module_abi.hpp checks it. Every
// pointer is memory of the backend's device unless said otherwise.
#pragma once

// Kernels queued in order on the backend's stream (the CPU runs them at once). A recorded step holds
// them with their arguments: memory they point at is read when they run.
#define KX_BACKEND_KERNELS(X)                                                                                    \
  /* bytes of dst set to zero. */                                                                                \
  X(fill_zero, (size_t bytes, void* dst), (bytes, dst))                                                          \
  /* C[M,N] = op(A)[M,K] * op(B)[K,N] + beta * C, row-major, then the epilogue. */                               \
  X(gemm,                                                                                                        \
    (Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,           \
     int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue& ep),                                        \
    (ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, ep))                                                         \
  /* The GEMMs of g (backend.hpp's BatchedGemm): attention's products, per sample and head. */                    \
  X(gemm_batched, (const BatchedGemm& g, const float* A, const float* B, float* C), (g, A, B, C))                \
  /* In place over rows x cols (softmax over each row); every activation. */                                     \
  X(activation_forward, (Activation act, int64_t rows, int64_t cols, float* y), (act, rows, cols, y))            \
  /* dz = dL/dz from the activation's output y and dy = dL/dy; dz may alias dy. Only the activations up          \
     to softmax: the others' gradients need their input (pointwise_activation_backward). */                      \
  X(activation_backward,                                                                                         \
    (Activation act, int64_t rows, int64_t cols, const float* y, const float* dy, float* dz),                    \
    (act, rows, cols, y, dy, dz))                                                                                \
  /* db[c] = sum over rows of dz[r, c]. */                                                                       \
  X(bias_grad, (int64_t rows, int64_t cols, const float* dz, float* db), (rows, cols, dz, db))                   \
  /* y[r, c] += bias[c] over rows x cols (a bias after a kernel that has no epilogue: col2im). */             \
  X(bias_add, (int64_t rows, int64_t cols, const float* bias, float* y), (rows, cols, bias, y))                 \
  /* Loss of rows rows (outputs cols per row, labels y with y_cols per row), added to the backend's           \
     running sums (take_loss_sums). weights: one per sample of spec.positions rows (Keras's sample_weight),     \
     or null for 1 each; row r's loss and accuracy count weights[r / spec.positions] times. The gradient of   \
     (sum of weighted row losses) * grad_scale goes to dout when it is not null. */                             \
  X(loss,                                                                                                        \
    (const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y, int64_t y_cols,         \
     const float* weights, float grad_scale, float* dout),                                                       \
    (spec, rows, cols, out, y, y_cols, weights, grad_scale, dout))                                               \
  /* col[(r * out_h + i) * out_w + j, (a * k_w + b) * channels + c] = x of sample r at                          \
     (i * stride_h + a - pad_top, j * stride_w + b - pad_left, c), or 0 outside the input. */                    \
  X(im2col, (const Window2d& g, int64_t rows, const float* x, float* col), (g, rows, x, col))                    \
  /* The adjoint of im2col: dx (overwritten) = the sum of every column entry at its input position. */          \
  X(col2im, (const Window2d& g, int64_t rows, const float* col, float* dx), (g, rows, col, dx))                  \
  /* Convolution run natively (cuDNN): y [rows, out_h, out_w, filters] = act(conv(x, w) + bias), w in           \
     Keras's layout [k_h, k_w, channels, filters], act None or Relu. Only where supports() says so for         \
     this geometry; elsewhere layers use im2col and gemm. */                                                     \
  X(conv2d_forward,                                                                                              \
    (const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w, const float* bias,        \
     Activation act, float* y),                                                                                  \
    (g, filters, rows, x, w, bias, act, y))                                                                      \
  /* From dz = dL/d(the convolution plus bias): dx, dw and db, each overwritten and each may be null. */        \
  X(conv2d_backward,                                                                                             \
    (const Window2d& g, int64_t filters, int64_t rows, const float* x, const float* w, const float* dz,          \
     float* dx, float* dw, float* db),                                                                           \
    (g, filters, rows, x, w, dz, dx, dw, db))                                                                    \
  /* Depthwise convolution (Keras's DepthwiseConv2D): channel c of x, convolved with w[:, :, c, m] (w is         \
     [k_h, k_w, channels, multiplier]), gives output channel c * multiplier + m of y [rows, out_h, out_w,        \
     channels * multiplier]; plus bias[c * multiplier + m] unless bias is null. Taps added in window order. */  \
  X(depthwise_conv2d_forward,                                                                                    \
    (const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w, const float* bias,     \
     float* y),                                                                                                  \
    (g, multiplier, rows, x, w, bias, y))                                                                        \
  /* Its gradients from dy = dL/dy: dx and dw, each overwritten and each may be null (dw summed in double). */  \
  X(depthwise_conv2d_backward,                                                                                   \
    (const Window2d& g, int64_t multiplier, int64_t rows, const float* x, const float* w, const float* dy,       \
     float* dx, float* dw),                                                                                      \
    (g, multiplier, rows, x, w, dy, dx, dw))                                                                     \
  /* Max over each window (no padding), channel by channel. */                                                  \
  X(max_pool_forward, (const Window2d& g, int64_t rows, const float* x, float* y), (g, rows, x, y))              \
  /* dx (overwritten): each window's dy goes to the first position holding its maximum. */                      \
  X(max_pool_backward,                                                                                           \
    (const Window2d& g, int64_t rows, const float* x, const float* y, const float* dy, float* dx),               \
    (g, rows, x, y, dy, dx))                                                                                     \
  /* Mean over each window (no padding), channel by channel. */                                                 \
  X(avg_pool_forward, (const Window2d& g, int64_t rows, const float* x, float* y), (g, rows, x, y))              \
  /* dx (overwritten): each window's dy shared equally between its positions. */                                \
  X(avg_pool_backward, (const Window2d& g, int64_t rows, const float* dy, float* dx), (g, rows, dy, dx))         \
  /* UpSampling2D (Keras's): y [rows, in_h * size_h, in_w * size_w, channels] from x, each pixel repeated     \
     (nearest) or TensorFlow's half-pixel bilinear resize (resize_math.hpp). */                                 \
  X(upsample2d_forward, (const Upsample2d& u, int64_t rows, const float* x, float* y), (u, rows, x, y))          \
  /* Its input gradient dx (overwritten) from dy, each input gathering the outputs that read it. */            \
  X(upsample2d_backward, (const Upsample2d& u, int64_t rows, const float* dy, float* dx), (u, rows, dy, dx))     \
  /* Per column c of x [rows, cols]: mean[c] and the biased variance var[c] (batch normalisation's              \
     statistics over every sample and position of a channel). */                                                 \
  X(column_moments, (int64_t rows, int64_t cols, const float* x, float* mean, float* var),                       \
    (rows, cols, x, mean, var))                                                                                  \
  /* y[r, c] = act(gamma[c] * (x[r, c] - mean[c]) / sqrt(var[c] + epsilon) + beta[c]); gamma may be null (1),   \
     beta null (0). act is None, or an activation pointwise_activation computes (the activation layer      \
     after a batch normalisation, which the step plan has the normalisation apply: one pass, not two). */  \
  X(batch_norm_apply,                                                                                            \
    (int64_t rows, int64_t cols, const float* x, const float* mean, const float* var, float epsilon,             \
     const float* gamma, const float* beta, Activation act, float* y),                                           \
    (rows, cols, x, mean, var, epsilon, gamma, beta, act, y))                                                    \
  /* The gradients of batch_norm_apply with mean and var the moments of x itself (training mode):               \
     dgamma, dbeta (overwritten) and, when dx is not null, dx (overwritten; it may be dy, each value of dx      \
     coming from dy's at its own index). dy is the gradient of act's output: with act other than None it is     \
     overwritten by the gradient at act's input. */                                                             \
  X(batch_norm_backward,                                                                                         \
    (int64_t rows, int64_t cols, const float* x, float* dy, const float* mean, const float* var, float epsilon,  \
     const float* gamma, const float* beta, Activation act, float* dx, float* dgamma, float* dbeta),              \
    (rows, cols, x, dy, mean, var, epsilon, gamma, beta, act, dx, dgamma, dbeta))                                \
  /* Layer normalisation of each row of x [rows, cols] (Keras 3's LayerNormalization, layer_norm_math.hpp):     \
     mean[r] and inv_std[r] = 1 / sqrt(var + epsilon) of row r (biased variance, sums in double), then          \
     y[r, c] = x * s + (beta[c] - mean * s) with s = inv_std * gamma[c]; gamma null: 1, beta null: 0. */          \
  X(layer_norm_forward,                                                                                          \
    (int64_t rows, int64_t cols, const float* x, float epsilon, const float* gamma, const float* beta, float* y,  \
     float* mean, float* inv_std),                                                                               \
    (rows, cols, x, epsilon, gamma, beta, y, mean, inv_std))                                                     \
  /* Its gradients from dy, with forward's mean and inv_std: dx, dgamma and dbeta (sums over rows in double),   \
     each overwritten and each may be null; dx may not alias dy. */                                              \
  X(layer_norm_backward,                                                                                         \
    (int64_t rows, int64_t cols, const float* x, const float* dy, const float* mean, const float* inv_std,       \
     const float* gamma, float* dx, float* dgamma, float* dbeta),                                                \
    (rows, cols, x, dy, mean, inv_std, gamma, dx, dgamma, dbeta))                                                \
  /* scores[b, i, j] += value where j > i, for b < count, i < rows, j < cols: Keras's causal mask, added as     \
     its Softmax adds a masked position's large negative number. */                                              \
  X(causal_mask_add, (int64_t count, int64_t rows, int64_t cols, float value, float* scores),                    \
    (count, rows, cols, value, scores))                                                                          \
  /* scores[r, h, i, j] = value where position (i, j) is masked, for r < rows, h < heads, i < tq, j < tv:   \
     masked where mask[r, i, j] == 0 (mask [rows, tq, tv], null for none; any other value, NaN too, keeps    \
     it, as Keras casts the mask to bool) or, with causal != 0, where j > i. Keras's Softmax replaces a       \
     masked score by its large negative number (and the same op with value 0 masks a gradient). */           \
  X(attention_mask_fill,                                                                                         \
    (int64_t rows, int64_t heads, int64_t tq, int64_t tv, const float* mask, int32_t causal, float value,        \
     float* scores),                                                                                             \
    (rows, heads, tq, tv, mask, causal, value, scores))                                                          \
  /* Inverted dropout: mask[i] = 0 or 1/(1-rate) from a counter-based RNG keyed by                              \
     (mix_seed(*step_seed, stream), first + i), so a replica holding rows from `first` on draws the             \
     same mask as one device holding the whole batch. */                                                         \
  X(dropout_forward,                                                                                             \
    (float rate, const uint64_t* step_seed, uint64_t stream, int64_t first, int64_t n, const float* x,           \
     float* mask, float* y),                                                                                     \
    (rate, step_seed, stream, first, n, x, mask, y))                                                             \
  /* y[i] = Keras's relu(x[i], negative_slope, max_value, threshold) (activation_math.hpp's relu_general);      \
     max_value +infinity for None. y may alias x. */                                                             \
  X(relu_general_forward,                                                                                        \
    (int64_t n, float negative_slope, float max_value, float threshold, const float* x, float* y),               \
    (n, negative_slope, max_value, threshold, x, y))                                                             \
  /* dx[i] = dy[i] times relu_general's derivative at x[i] (TensorFlow's at the kinks); dx may alias dy. */       \
  X(relu_general_backward,                                                                                       \
    (int64_t n, float negative_slope, float max_value, float threshold, const float* x, const float* dy,         \
     float* dx),                                                                                                 \
    (n, negative_slope, max_value, threshold, x, dy, dx))                                                        \
  /* y[i] = act(x[i]), act element-wise (pointwise_activation_math.hpp; softmax is refused); y may               \
     alias x. */                                                                                                 \
  X(pointwise_activation_forward, (Activation act, int64_t n, const float* x, float* y), (act, n, x, y))         \
  /* dx[i] = dy[i] times act's derivative at x[i] (the activation's input); dx may alias dy. */                  \
  X(pointwise_activation_backward, (Activation act, int64_t n, const float* x, const float* dy, float* dx),      \
    (act, n, x, dy, dx))                                                                                         \
  /* out[r, p] = a op b of sample r with NumPy's broadcasting, or of a tensor and s.scalar                       \
     (binary_op_math.hpp); out may not alias a or b. */                                                          \
  X(binary_forward, (const BinaryShape& s, int64_t rows, const float* a, const float* b, float* out),            \
    (s, rows, a, b, out))                                                                                        \
  /* d (overwritten) = dL/d(operand `which`: 0 for a, 1 for b) from dy, summed over the axes it is               \
     broadcast along; a and b are read only where the operation's derivative needs them. */                      \
  X(binary_backward,                                                                                             \
    (const BinaryShape& s, int64_t rows, int32_t which, const float* a, const float* b, const float* dy,          \
     float* d),                                                                                                  \
    (s, rows, which, a, b, dy, d))                                                                               \
  /* y[i] = x[i] * scale + offset, rounded after each operation (Keras's Rescaling); y may alias x. */           \
  X(scale_shift, (int64_t n, float scale, float offset, const float* x, float* y), (n, scale, offset, x, y))     \
  /* out[i] = a[i] * b[i] */                                                                                     \
  X(multiply, (int64_t n, const float* a, const float* b, float* out), (n, a, b, out))                           \
  X(copy, (int64_t n, const float* src, float* dst), (n, src, dst))                                              \
  /* out[i] = a[i] + b[i]; out may alias a or b. */                                                              \
  X(add, (int64_t n, const float* a, const float* b, float* out), (n, a, b, out))                                \
  /* out[i] = alpha * (a[i] - b[i]). */                                                                          \
  X(scaled_difference, (int64_t n, float alpha, const float* a, const float* b, float* out),                     \
    (n, alpha, a, b, out))                                                                                       \
  /* dst[r * dst_ld + c] = src[r * src_ld + c] for r < rows, c < cols (a block of columns). */                  \
  X(copy_columns, (int64_t rows, int64_t cols, const float* src, int64_t src_ld, float* dst, int64_t dst_ld),    \
    (rows, cols, src, src_ld, dst, dst_ld))                                                                      \
  /* p -= lr * g, or with momentum: v = momentum * v - lr * g; p += v (Keras). The rate is read from            \
     this backend's memory when the update runs (StepValues). grad_factor: null, or in this backend's           \
     memory a factor g is multiplied by (a loss scale's 1/scale); 0 skips the update (nothing written). */       \
  X(sgd_update,                                                                                                  \
    (int64_t n, float* p, const float* g, float* v, const float* lr, float momentum, const float* grad_factor),  \
    (n, p, g, v, lr, momentum, grad_factor))                                                                     \
  /* Keras 3's Adam: m += (g - m) * one_minus_beta1; v += (g^2 - v) * one_minus_beta2; p -= (m * lr_t) /     \
     (sqrt(v) + epsilon), lr_t (adam_math.hpp's adam_rate) read from this backend's memory when the update      \
     runs, the (1 - beta) constants rounded as Keras 3 rounds them (adam_one_minus). grad_factor as for          \
     sgd_update. */                                                                                              \
  X(adam_update,                                                                                                 \
    (int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, float one_minus_beta1,         \
     float one_minus_beta2, float epsilon, const float* grad_factor),                                            \
    (n, p, g, m, v, lr_t, one_minus_beta1, one_minus_beta2, epsilon, grad_factor))                               \
  /* Keras 3's AdamW: p -= p * weight_decay * lr (the plain rate, read from this backend's memory), then     \
     adam_update's step with lr_t (optimizer_math.hpp); grad_factor as for sgd_update (0 skips both). */      \
  X(adamw_update,                                                                                                \
    (int64_t n, float* p, const float* g, float* m, float* v, const float* lr_t, const float* lr,               \
     float weight_decay, float one_minus_beta1, float one_minus_beta2, float epsilon, const float* grad_factor), \
    (n, p, g, m, v, lr_t, lr, weight_decay, one_minus_beta1, one_minus_beta2, epsilon, grad_factor))            \
  /* Keras 3's RMSprop (optimizer_math.hpp's rmsprop_step): velocity v, momentum m (null without momentum)   \
     and average gradient a (null unless centered), the rate read from this backend's memory; grad_factor     \
     as for sgd_update. */                                                                                       \
  X(rmsprop_update,                                                                                              \
    (int64_t n, float* p, const float* g, float* v, float* m, float* a, const float* lr,                        \
     const RmsPropConstants& c, const float* grad_factor),                                                       \
    (n, p, g, v, m, a, lr, c, grad_factor))                                                                      \
  /* dst[i, :] = src[idx[i], :] for i < n, rows of row_len floats; idx is memory of this backend too. */        \
  X(gather_rows, (const float* src, int64_t row_len, const int64_t* idx, int64_t n, float* dst),                 \
    (src, row_len, idx, n, dst))                                                                                 \
  /* Embedding lookup: y[i, :] = table[ids[i], :] for i < n (rows of dim floats; ids hold integers as      \
     floats, the model's input); mask, when not null, gets mask[i] = ids[i] != 0 (Keras's mask_zero). An id   \
     outside [0, vocab) is InvalidArgument on the CPU; the CUDA kernel writes zeros for it, never reads       \
     outside the table (as TensorFlow on a GPU). */                                                            \
  X(embedding_forward,                                                                                         \
    (int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* table, float* y, float* mask),      \
    (n, vocab, dim, ids, table, y, mask))                                                                      \
  /* dtable (overwritten) [vocab, dim] = the sum of dy[i, :] into row ids[i], i in increasing order; ids       \
     outside [0, vocab) add nothing. */                                                                        \
  X(embedding_backward, (int64_t n, int64_t vocab, int64_t dim, const float* ids, const float* dy, float* dtable), \
    (n, vocab, dim, ids, dy, dtable))                                                                          \
  /* Keras's Masking over positions of `features` values: mask[p] = 1 where any x[p, f] != mask_value            \
     (NaN counts as different), else 0; y[p, :] = x[p, :] where mask[p], else 0 (Keras's where, not a            \
     product). */                                                                                                \
  X(masking_forward,                                                                                             \
    (int64_t positions, int64_t features, float mask_value, const float* x, float* y, float* mask),              \
    (positions, features, mask_value, x, y, mask))                                                               \
  /* Its gradient: dx[p, :] = dy[p, :] where mask[p] != 0, else 0; dx may alias dy. */                           \
  X(masking_backward, (int64_t positions, int64_t features, const float* mask, const float* dy, float* dx),      \
    (positions, features, mask, dy, dx))                                                                         \
  /* One LSTM step (recurrent_math.hpp): gates (in: x W + b + h U; out: i, f, g, o activated), c and h of     \
     the step (h_prev, c_prev null: zeros); masked rows keep h_prev and c_prev; y (may be null) gets h, or 0  \
     on a masked row with zero_masked_output. */                                                               \
  X(lstm_step_forward,                                                                                         \
    (const RecurrentStep& s, float* gates, const float* c_prev, const float* h_prev, const float* mask,         \
     float* c, float* h, float* y),                                                                            \
    (s, gates, c_prev, h_prev, mask, c, h, y))                                                                 \
  /* Its gradient back through the step: dh [rows, units] (in: dL/dh of later steps; dy added, may be null)  \
     becomes the carried part of dL/dh_prev (0 on unmasked rows, where h U's gradient is added after);       \
     dc [rows, units] becomes dL/dc_prev; gates (activated) become dL/d(pre-activations). */                   \
  X(lstm_step_backward,                                                                                        \
    (const RecurrentStep& s, float* gates, const float* c_prev, const float* c, const float* mask,             \
     const float* dy, float* dh, float* dc),                                                                   \
    (s, gates, c_prev, c, mask, dy, dh, dc))                                                                   \
  /* One GRU step, Keras's reset_after: gates (in: x W + b_in; out: z, r, hh activated), recurrent           \
     (h_prev U + b_rec, read), h of the step; masks and y as lstm_step_forward. */                            \
  X(gru_step_forward,                                                                                          \
    (const RecurrentStep& s, float* gates, const float* recurrent, const float* h_prev, const float* mask,     \
     float* h, float* y),                                                                                      \
    (s, gates, recurrent, h_prev, mask, h, y))                                                                 \
  /* Its gradient: gates become dL/d(x W + b_in), recurrent dL/d(h_prev U + b_rec), dh the part of           \
     dL/dh_prev that does not pass through U (dy added first, may be null). */                                 \
  X(gru_step_backward,                                                                                         \
    (const RecurrentStep& s, float* gates, float* recurrent, const float* h_prev, const float* mask,           \
     const float* dy, float* dh),                                                                              \
    (s, gates, recurrent, h_prev, mask, dy, dh))                                                               \
  /* y[i] = x[i] rounded to r (rounding_math.hpp); y may alias x. */                                            \
  X(round_to, (Rounding r, int64_t n, const float* x, float* y), (r, n, x, y))                                   \
  /* x[i] *= *factor, the factor read from this backend's memory when the kernel runs. */                       \
  X(multiply_by, (int64_t n, const float* factor, float* x), (n, factor, x))                                     \
  /* s->finite = 0 when a value of g[0, n) is infinite or NaN. */                                               \
  X(loss_scale_check, (int64_t n, const float* g, LossScaleState* s), (n, g, s))                                 \
  /* After the checks of a step's gradients, as Keras's LossScaleOptimizer: finite, grad_factor =              \
     1 / scale, applied = 1, and the scale doubles once good_steps reaches growth_steps; else                   \
     grad_factor = applied = 0, the scale halves and good_steps restarts. Then finite = 1 again. */             \
  X(loss_scale_update, (LossScaleState * s), (s))

// Calls that read host memory or wait for the device: they run at once and cannot be part of a
// recorded step (the recorder refuses them while it records).
#define KX_BACKEND_DIRECT_CALLS(X)                                                                               \
  /* From host memory; the host may reuse its buffer when the call returns. */                                   \
  X(to_device, (const void* host, size_t bytes, void* dst), (host, bytes, dst))                                  \
  /* Into host memory; returns once the data is there. */                                                        \
  X(to_host, (const void* src, size_t bytes, void* host), (src, bytes, host))                                    \
  /* Returns when every call queued before has finished. */                                                      \
  X(synchronize, (), ())
