// Element-wise kernels that run over every activation of a step, on one contiguous span each. Like the
// optimizer kernels they have AVX-512 and AVX2 clones on x86-64.
#pragma once
#include <cstdint>

#include "kx/layer.hpp"

namespace kx::backend::cpu {

// dz = y > 0 ? dy : 0 (dz may be dy).
void relu_backward_span(int64_t n, const float* y, const float* dy, float* dz);
// Keras's relu with settings (activation_math.hpp's relu_general) and its backward, element by element
// as there; relu and relu6 (no slope, no threshold: MobileNets' every activation) in a loop the
// compiler vectorises, the settings' branches decided once per span instead of per element.
void relu_general_span(int64_t n, float slope, float max_value, float threshold, const float* x, float* y);
void relu_general_backward_span(int64_t n, float slope, float max_value, float threshold, const float* x,
                                const float* dy, float* dx);
// Inverted dropout of elements first .. first + n of a counter-based stream keyed by seed.
void dropout_span(float rate, uint64_t seed, int64_t first, int64_t n, const float* x, float* mask, float* y);

// y = act(x) and dx = dy * act'(x), act element-wise (pointwise_activation_math.hpp); y may be x, dx dy.
void pointwise_activation_span(Activation act, int64_t n, const float* x, float* y);
void pointwise_activation_backward_span(Activation act, int64_t n, const float* x, const float* dy, float* dx);

// Swish of v = x * scale + shift per column (a batch normalisation's output, its product and sum
// rounded apart as batch_norm_apply rounds them), for rows [r0, r1) of x [rows, cols]: forward writes
// swish(v) into out's rows from r0; with `gradient`, out holds dy at those rows and becomes dy * swish'(v).
// In one pass over each row, with pointwise_activation_span's values. False, and nothing done, on a CPU
// with neither AVX-512 nor AVX2 and FMA (then the caller forms v and applies the span).
bool swish_of_affine_rows(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* scale, const float* shift,
                          float* out, bool gradient);

// Softmax over each row of y [rows, cols] in place: the row's maximum subtracted first (no overflow),
// exp vectorised (vector_math.hpp). And its backward: dz = y * (dy - sum(dy * y)) per row (dz may be dy).
void softmax_rows(int64_t rows, int64_t cols, float* y);
void softmax_backward_rows(int64_t rows, int64_t cols, const float* y, const float* dy, float* dz);

}  // namespace kx::backend::cpu
