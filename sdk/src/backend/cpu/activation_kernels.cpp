#include "backend/cpu/activation_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "backend/activation_math.hpp"
#include "backend/cpu/avx2_common.hpp"
#include "backend/cpu/avx512_common.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/prefetch_rows.hpp"
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's intrinsics read _mm512_undefined_ps values
// The logistic function of 16 lanes as vector_sigmoid forms it, exp(-|x|) by the same reduction and
// Taylor polynomial but with fused multiply-adds and the power of two applied by VSCALEFPS (which rounds
// subnormal results once): about half the instructions, within an ulp or two of vector_sigmoid.
KX_AVX512 __m512 sigmoid_avx512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 minus_abs = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
  const __m512 t = _mm512_max_ps(_mm512_set1_ps(-110.0f), minus_abs);  // exp is 0 below; NaN stays NaN
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
#pragma GCC unroll 7  // else GCC loads each constant in a loop
  for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512 e = _mm512_scalef_ps(p, n);
  const __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), e, one);
  return _mm512_div_ps(num, _mm512_add_ps(one, e));
}
// Swish of v or its gradient times dy (pointwise_activation_math.hpp's formulas around the sigmoid).
KX_AVX512 __m512 swish_avx512(__m512 v, const float* dy, __mmask16 m) {
  const __m512 one = _mm512_set1_ps(1.0f), s = sigmoid_avx512(v);
  if (!dy) return _mm512_mul_ps(v, s);
  // TensorFlow's: dy * s * (1 + x * (1 - s))
  return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy),
                       _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(v, _mm512_sub_ps(one, s)))));
}
__mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}
// Swish and its gradient 16 values at a time; the last values under a mask.
KX_AVX512 void silu_avx512(int64_t n, const float* x, const float* dy, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, swish_avx512(_mm512_maskz_loadu_ps(m, x + i), dy ? dy + i : nullptr, m));
  }
}
// The same of x * scale + shift, row by row (swish_of_affine_rows).
KX_AVX512 void swish_of_affine_avx512(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* scale,
                                      const float* shift, float* out, bool gradient) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float* o = out + (r - r0) * cols;
    prefetch_row(xr + prefetch_offset(cols), cols);
    if (gradient) prefetch_row(o + prefetch_offset(cols), cols, true);
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 m = tail_mask(cols - c);
      const __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + c), _mm512_maskz_loadu_ps(m, scale + c)),
                                     _mm512_maskz_loadu_ps(m, shift + c));
      _mm512_mask_storeu_ps(o + c, m, swish_avx512(v, gradient ? o + c : nullptr, m));
    }
  }
}
#pragma GCC diagnostic pop

// The same on CPUs with AVX2 and FMA but no AVX-512: 8 lanes, and 2^n applied as two powers built in
// the exponent bits (n >= -159 here: each half is a normal float), as vector_exp applies it.
[[gnu::always_inline]] KX_AVX2_FMA inline __m256 sigmoid_avx2(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 minus_abs = _mm256_or_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 t = _mm256_max_ps(_mm256_set1_ps(-110.0f), minus_abs);  // exp is 0 below; NaN stays NaN
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), t);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
#pragma GCC unroll 7  // else GCC loads each constant in a loop
  for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23))),
                                 _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
  const __m256 num = _mm256_blendv_ps(e, one, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
  return _mm256_div_ps(num, _mm256_add_ps(one, e));
}
[[gnu::always_inline]] KX_AVX2_FMA inline __m256 swish_avx2(__m256 v, __m256 dy, bool gradient) {
  const __m256 one = _mm256_set1_ps(1.0f), s = sigmoid_avx2(v);
  if (!gradient) return _mm256_mul_ps(v, s);
  // TensorFlow's: dy * s * (1 + x * (1 - s))
  return _mm256_mul_ps(dy, _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(v, _mm256_sub_ps(one, s)))));
}
KX_AVX2_FMA void silu_avx2(int64_t n, const float* x, const float* dy, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, swish_avx2(_mm256_loadu_ps(x + i), dy ? _mm256_loadu_ps(dy + i) : _mm256_setzero_ps(), dy != nullptr));
  if (i == n) return;
  const __m256i m = tail_mask_avx2(n - i);
  const __m256 g = dy ? _mm256_maskload_ps(dy + i, m) : _mm256_setzero_ps();
  _mm256_maskstore_ps(out + i, m, swish_avx2(_mm256_maskload_ps(x + i, m), g, dy != nullptr));
}
KX_AVX2_FMA void swish_of_affine_avx2(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* scale,
                                      const float* shift, float* out, bool gradient) {
  const __m256i m = tail_mask_avx2(cols % 8);
  const int64_t full = cols - cols % 8;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * cols;
    float* o = out + (r - r0) * cols;
    prefetch_row(xr + prefetch_offset(cols), cols);
    if (gradient) prefetch_row(o + prefetch_offset(cols), cols, true);
    for (int64_t c = 0; c < full; c += 8) {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + c), _mm256_loadu_ps(scale + c)),
                                     _mm256_loadu_ps(shift + c));
      _mm256_storeu_ps(o + c, swish_avx2(v, gradient ? _mm256_loadu_ps(o + c) : _mm256_setzero_ps(), gradient));
    }
    if (full == cols) continue;
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_maskload_ps(xr + full, m), _mm256_maskload_ps(scale + full, m)),
                                   _mm256_maskload_ps(shift + full, m));
    _mm256_maskstore_ps(o + full, m, swish_avx2(v, gradient ? _mm256_maskload_ps(o + full, m) : _mm256_setzero_ps(), gradient));
  }
}
#else
void silu_avx512(int64_t, const float*, const float*, float*) {}
void swish_of_affine_avx512(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, bool) {}
void silu_avx2(int64_t, const float*, const float*, float*) {}
void swish_of_affine_avx2(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, bool) {}
#endif

// Swish, after nearly every normalisation of EfficientNet: its sigmoid is most of the loop's work, which
// fused multiply-adds and a shorter power of two halve on the CPUs that have AVX-512 or AVX2 and FMA.
// Every clone computes the same bits; the AVX-512 and AVX2 kernels within an ulp or two of them.
KX_CLONES_AVX2 void silu_forward_span(int64_t n, const float* x, float* y) {
  if (cpu_has_avx512()) return silu_avx512(n, x, nullptr, y);
  if (cpu_has_avx2_fma()) return silu_avx2(n, x, nullptr, y);
  forward_span<Activation::Silu>(n, x, y);
}
KX_CLONES_AVX2 void silu_backward_span(int64_t n, const float* x, const float* dy, float* dx) {
  if (cpu_has_avx512()) return silu_avx512(n, x, dy, dx);
  if (cpu_has_avx2_fma()) return silu_avx2(n, x, dy, dx);
  backward_span<Activation::Silu>(n, x, dy, dx);
}

}  // namespace

bool swish_of_affine_rows(int64_t r0, int64_t r1, int64_t cols, const float* x, const float* scale, const float* shift,
                          float* out, bool gradient) {
  if (cpu_has_avx512()) swish_of_affine_avx512(r0, r1, cols, x, scale, shift, out, gradient);
  else if (cpu_has_avx2_fma()) swish_of_affine_avx2(r0, r1, cols, x, scale, shift, out, gradient);
  else return false;
  return true;
}

namespace {

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
