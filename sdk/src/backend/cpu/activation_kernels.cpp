#include "backend/cpu/activation_kernels.hpp"

#include <cmath>

#include "backend/activation_math.hpp"
#include "backend/cpu/target_clones.hpp"
#include "backend/cpu/vector_math.hpp"
#include "backend/pointwise_activation_math.hpp"
#include "backend/seed_mix.hpp"

namespace kx::backend::cpu {

KX_CLONES_AVX2 void relu_backward_span(int64_t n, const float* y, const float* dy, float* dz) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dz[i] = relu_backward(y[i], dy[i]);
}

namespace {

bool clipped_relu(float slope, float threshold) { return slope == 0.0f && threshold == 0.0f; }

}  // namespace

KX_CLONES_AVX2 void relu_general_span(int64_t n, float slope, float max_value, float threshold, const float* x, float* y) {
  if (clipped_relu(slope, threshold)) {
    // relu then clip, as relu_general: NaN stays NaN (neither comparison holds).
    const float limit = max_value <= kReluNoClip ? max_value : INFINITY;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float r = x[i] < 0.0f ? 0.0f : x[i];
      y[i] = r > limit ? limit : r;
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = relu_general(x[i], slope, max_value, threshold);
}

KX_CLONES_AVX2 void relu_general_backward_span(int64_t n, float slope, float max_value, float threshold, const float* x,
                                          const float* dy, float* dx) {
  if (clipped_relu(slope, threshold)) {
    // relu_general_backward's pass: strictly inside (0, 6) for relu6, else above 0 and up to the clip.
    const float limit = max_value <= kReluNoClip ? max_value : INFINITY;
    if (max_value == 6.0f) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f;
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f && !(x[i] > limit) ? dy[i] : 0.0f;
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = relu_general_backward(x[i], dy[i], slope, max_value, threshold);
}

KX_CLONES_AVX2 void dropout_span(float rate, uint64_t seed, int64_t first, int64_t n, const float* x, float* mask,
                            float* y) {
  const float keep_scale = 1.0f / (1.0f - rate);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    // Element i's draw depends only on (seed, i), never on threads or order.
    const float u = dropout_uniform(seed, static_cast<uint64_t>(first + i));
    mask[i] = u >= rate ? keep_scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

namespace {

// One loop per activation, so that none tests which activation it is per element.
template <Activation A>
inline void forward_span(int64_t n, const float* x, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = pointwise_activation(A, x[i]);
}
template <Activation A>
inline void backward_span(int64_t n, const float* x, const float* dy, float* dx) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = pointwise_activation_backward(A, x[i], dy[i]);
}

// The logistic function and swish (EfficientNet's, MobileNetV3's hard-swish aside) with the vectorised
// sigmoid: libm's expf would keep these loops scalar. The formulas are pointwise_activation_math.hpp's.
template <>
inline void forward_span<Activation::Sigmoid>(int64_t n, const float* x, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = vector_sigmoid(x[i]);
}
template <>
inline void backward_span<Activation::Sigmoid>(int64_t n, const float* x, const float* dy, float* dx) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = sigmoid_backward(vector_sigmoid(x[i]), dy[i]);
}
template <>
inline void forward_span<Activation::Silu>(int64_t n, const float* x, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = mul_rn(x[i], vector_sigmoid(x[i]));
}
template <>
inline void backward_span<Activation::Silu>(int64_t n, const float* x, const float* dy, float* dx) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {  // TensorFlow's: dy * s * (1 + x * (1 - s))
    const float s = vector_sigmoid(x[i]);
    dx[i] = mul_rn(dy[i], mul_rn(s, add_rn(1.0f, mul_rn(x[i], sub_rn(1.0f, s)))));
  }
}

// Swish, after nearly every normalisation of EfficientNet: its sigmoid is most of the loop's work, which
// AVX-512 halves on the CPUs that have it (all three clones, where the other activations' loops stop at
// AVX2). The same operations in the same order in every clone: the same bits.
KX_CLONES void silu_forward_span(int64_t n, const float* x, float* y) { forward_span<Activation::Silu>(n, x, y); }
KX_CLONES void silu_backward_span(int64_t n, const float* x, const float* dy, float* dx) {
  backward_span<Activation::Silu>(n, x, dy, dx);
}

// The activations whose loops vectorise (in CPU clones) and those that call libm's erfc, exp, log1p or
// tanh per element, whose loops stay scalar whatever the clone: one plain copy of those is enough.
#define KX_EACH_VECTOR_ACTIVATION(X) X(None) X(Relu) X(Sigmoid) X(Relu6) X(HardSilu) X(HardSigmoid) X(LeakyRelu)
#define KX_EACH_SCALAR_ACTIVATION(X) X(Tanh) X(Gelu) X(GeluTanh) X(Elu) X(Softplus)

KX_CLONES_AVX2 void vector_activation_span(Activation act, int64_t n, const float* x, float* y) {
  switch (act) {
#define KX_FORWARD_CASE(a) \
  case Activation::a: return forward_span<Activation::a>(n, x, y);
    KX_EACH_VECTOR_ACTIVATION(KX_FORWARD_CASE)
    default: break;
  }
}

KX_CLONES_AVX2 void vector_activation_backward_span(Activation act, int64_t n, const float* x, const float* dy,
                                                    float* dx) {
  switch (act) {
#define KX_BACKWARD_CASE(a) \
  case Activation::a: return backward_span<Activation::a>(n, x, dy, dx);
    KX_EACH_VECTOR_ACTIVATION(KX_BACKWARD_CASE)
    default: break;
  }
}

}  // namespace

void pointwise_activation_span(Activation act, int64_t n, const float* x, float* y) {
  switch (act) {
    case Activation::Silu: return silu_forward_span(n, x, y);
    KX_EACH_SCALAR_ACTIVATION(KX_FORWARD_CASE)
    default: return vector_activation_span(act, n, x, y);
  }
}

void pointwise_activation_backward_span(Activation act, int64_t n, const float* x, const float* dy, float* dx) {
  switch (act) {
    case Activation::Silu: return silu_backward_span(n, x, dy, dx);
    KX_EACH_SCALAR_ACTIVATION(KX_BACKWARD_CASE)
    default: return vector_activation_backward_span(act, n, x, dy, dx);
  }
}
#undef KX_FORWARD_CASE
#undef KX_BACKWARD_CASE

KX_CLONES_AVX2 void softmax_rows(int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = y + r * cols;
    float top = v[0];
#pragma omp simd reduction(max : top)
    for (int64_t j = 1; j < cols; ++j) top = v[j] > top ? v[j] : top;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) {
      const float e = vector_exp(v[j] - top);
      v[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) v[j] *= inv;
  }
}

KX_CLONES_AVX2 void softmax_backward_rows(int64_t rows, int64_t cols, const float* y, const float* dy, float* dz) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dzr = dz + r * cols;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < cols; ++j) dot += dyr[j] * yr[j];
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) dzr[j] = yr[j] * (dyr[j] - dot);
  }
}

}  // namespace kx::backend::cpu
