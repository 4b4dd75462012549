// Float64 reference implementations and finite differences for the unit tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kx/error.hpp"
#include "kx/layer.hpp"
#include "kx/tensor.hpp"

namespace kx::test {

using Vec = std::vector<double>;

// The status f throws as a kx::Error, or Ok.
inline Status status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.status();
  }
  return Status::Ok;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline FloatBuffer to_buffer(const std::vector<float>& v) { return FloatBuffer(v.begin(), v.end()); }
inline Vec to_double(const float* p, size_t n) { return Vec(p, p + n); }

// y[r, :] = act(x[r, :] W + b), all in double.
// Keras 3's element-wise activations after softmax (relu6, silu, hard_silu, hard_sigmoid, gelu and its
// tanh form, elu, leaky_relu, softplus) by their definitions, in float64.
inline double keras_activation(Activation act, double x) {
  const double hard_sigmoid = std::min(std::max(x + 3, 0.0), 6.0) / 6;
  switch (act) {
    case Activation::Relu6: return std::min(std::max(x, 0.0), 6.0);
    case Activation::Silu: return x / (1 + std::exp(-x));
    case Activation::HardSilu: return x * hard_sigmoid;
    case Activation::HardSigmoid: return hard_sigmoid;
    case Activation::Gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case Activation::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case Activation::Elu: return x < 0 ? std::expm1(x) : x;
    case Activation::LeakyRelu: return x > 0 ? x : 0.2 * x;
    case Activation::Softplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    default: throw Error(Status::Internal, std::string("no element-wise reference for ") + activation_name(act));
  }
}

inline Vec dense_forward(const Vec& x, const Vec& w, const Vec& b, int64_t rows, int64_t in, int64_t units,
                         Activation act) {
  Vec y(static_cast<size_t>(rows * units));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t u = 0; u < units; ++u) {
      double z = b[u];
      for (int64_t k = 0; k < in; ++k) z += x[r * in + k] * w[k * units + u];
      y[r * units + u] = z;
    }
    double* row = &y[r * units];
    switch (act) {
      case Activation::None: break;
      case Activation::Relu:
        for (int64_t u = 0; u < units; ++u) row[u] = std::max(row[u], 0.0);
        break;
      case Activation::Sigmoid:
        for (int64_t u = 0; u < units; ++u) row[u] = 1.0 / (1.0 + std::exp(-row[u]));
        break;
      case Activation::Tanh:
        for (int64_t u = 0; u < units; ++u) row[u] = std::tanh(row[u]);
        break;
      case Activation::Softmax: {
        double mx = row[0], s = 0;
        for (int64_t u = 1; u < units; ++u) mx = std::max(mx, row[u]);
        for (int64_t u = 0; u < units; ++u) s += (row[u] = std::exp(row[u] - mx));
        for (int64_t u = 0; u < units; ++u) row[u] /= s;
        break;
      }
      default:
        for (int64_t u = 0; u < units; ++u) row[u] = keras_activation(act, row[u]);
        break;
    }
  }
  return y;
}

// Central finite differences of f at v, element by element, in double.
inline Vec numeric_gradient(const std::function<double(const Vec&)>& f, Vec v, double h = 1e-6) {
  Vec g(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = f(v);
    v[i] = keep - h;
    const double down = f(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Keras's BatchNormalization in float64, normalising with the batch's moments.
inline Vec batch_norm_reference(const Vec& x, const Vec& w, int64_t n, int64_t C, double eps) {
  Vec y(x.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < n; ++r) mean += x[static_cast<size_t>(r * C + c)] / n;
    for (int64_t r = 0; r < n; ++r) var += std::pow(x[static_cast<size_t>(r * C + c)] - mean, 2) / n;
    for (int64_t r = 0; r < n; ++r)
      y[static_cast<size_t>(r * C + c)] =
          w[static_cast<size_t>(c)] * (x[static_cast<size_t>(r * C + c)] - mean) / std::sqrt(var + eps) + w[static_cast<size_t>(C + c)];
  }
  return y;
}

// Keras's Normalization in float64: (x - mean) / max(sqrt(variance), 1e-7) per channel.
inline Vec normalization_reference(const Vec& x, const std::vector<float>& mean, const std::vector<float>& var, int64_t C) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i % static_cast<size_t>(C);
    y[i] = (x[i] - mean[c]) / std::max(std::sqrt(static_cast<double>(var[c])), 1e-7);
  }
  return y;
}

// 2-D pooling of NHWC x (rows x H x W x C) with k_h x k_w windows and strides s_h, s_w, no padding:
// the maximum or the mean of each window, in double.
inline Vec pool2d_reference(const Vec& x, int64_t rows, int64_t H, int64_t W, int64_t C, int64_t k_h, int64_t k_w,
                            int64_t s_h, int64_t s_w, bool max) {
  const int64_t OH = (H - k_h) / s_h + 1, OW = (W - k_w) / s_w + 1;
  Vec y(static_cast<size_t>(rows * OH * OW * C));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j)
        for (int64_t c = 0; c < C; ++c) {
          double acc = max ? -1e300 : 0.0;
          for (int64_t a = 0; a < k_h; ++a)
            for (int64_t b = 0; b < k_w; ++b) {
              const double v = x[static_cast<size_t>(((r * H + i * s_h + a) * W + j * s_w + b) * C + c)];
              acc = max ? std::max(acc, v) : acc + v;
            }
          y[static_cast<size_t>(((r * OH + i) * OW + j) * C + c)] = max ? acc : acc / static_cast<double>(k_h * k_w);
        }
  return y;
}

// Concatenate along the last axis: at each of `positions` positions, a's ca values, then b's cb.
inline Vec concatenate_reference(const Vec& a, const Vec& b, int64_t positions, int64_t ca, int64_t cb) {
  Vec y;
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t c = 0; c < ca; ++c) y.push_back(a[static_cast<size_t>(p * ca + c)]);
    for (int64_t c = 0; c < cb; ++c) y.push_back(b[static_cast<size_t>(p * cb + c)]);
  }
  return y;
}

// |got - want| <= tol * max(1, |want|) for every element; returns the first failing index or -1.
template <class A, class B>
long first_mismatch(const A& got, const B& want, size_t n, double tol) {
  for (size_t i = 0; i < n; ++i)
    if (!(std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])) <=
          tol * std::max(1.0, std::fabs(static_cast<double>(want[i])))))
      return static_cast<long>(i);
  return -1;
}

// max |a - b| over max |b|: how far apart two weight vectors are, on the scale of the weights.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

}  // namespace kx::test
