// UpSampling2D's two interpolations, one output or input element at a time, for the CPU backend and
// the CUDA kernels alike (the same formula, each operation rounded on its own: the same bits).
//
// Bilinear is TensorFlow's (tf.image.resize, which Keras 3's UpSampling2D calls): half-pixel centres,
// source coordinate in = (o + 0.5) * (in_size / out_size) - 0.5 in float32, its two neighbours clamped
// to the input and the fraction in - floor(in); a value is top + (bottom - top) * y_lerp of the rows'
// top_left + (top_right - top_left) * x_lerp. The gradient gathers: each input sums, over the outputs
// that read it (rows rising, then columns), dy times its two weights.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/backend.hpp"
#include "backend/host_device.hpp"
#include "backend/rounded_math.hpp"

namespace kx::backend {

// The two input indices output index o reads along one axis, and the weight of the upper one.
struct LinearTap {
  int64_t lower = 0, upper = 0;
  float lerp = 0.0f;
};

KX_HOST_DEVICE inline LinearTap bilinear_tap(int64_t o, int64_t in_size, int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  const float in = sub_rn(mul_rn(add_rn(static_cast<float>(o), 0.5f), scale), 0.5f);
  const float in_floor = floorf(in);
  LinearTap t;
  t.lower = static_cast<int64_t>(in_floor) > 0 ? static_cast<int64_t>(in_floor) : 0;
  const int64_t ceiling = static_cast<int64_t>(ceilf(in));
  t.upper = ceiling < in_size - 1 ? ceiling : in_size - 1;
  t.lerp = sub_rn(in, in_floor);
  return t;
}

// What input index i weighs in output index o's value along one axis (0 when o does not read it).
KX_HOST_DEVICE inline float bilinear_weight(const LinearTap& t, int64_t i) {
  float w = 0.0f;
  if (t.lower == i) w = add_rn(w, sub_rn(1.0f, t.lerp));
  if (t.upper == i) w = add_rn(w, t.lerp);
  return w;
}

// y[r, oy, ox, c] of the bilinear upsampling of x [rows, in_h, in_w, channels].
KX_HOST_DEVICE inline float bilinear_value(const Upsample2d& u, const float* x, int64_t r, int64_t oy, int64_t ox,
                                           int64_t c) {
  const LinearTap ty = bilinear_tap(oy, u.in_h, u.in_h * u.size_h);
  const LinearTap tx = bilinear_tap(ox, u.in_w, u.in_w * u.size_w);
  const auto at = [&](int64_t yy, int64_t xx) { return x[((r * u.in_h + yy) * u.in_w + xx) * u.channels + c]; };
  const float top_left = at(ty.lower, tx.lower), top_right = at(ty.lower, tx.upper);
  const float bottom_left = at(ty.upper, tx.lower), bottom_right = at(ty.upper, tx.upper);
  const float top = add_rn(top_left, mul_rn(sub_rn(top_right, top_left), tx.lerp));
  const float bottom = add_rn(bottom_left, mul_rn(sub_rn(bottom_right, bottom_left), tx.lerp));
  return add_rn(top, mul_rn(sub_rn(bottom, top), ty.lerp));
}

// dx[r, y, x, c] of the bilinear upsampling: the outputs within a factor's reach of (y, x) that read it.
KX_HOST_DEVICE inline float bilinear_input_grad(const Upsample2d& u, const float* dy, int64_t r, int64_t y, int64_t x,
                                                int64_t c) {
  const int64_t out_h = u.in_h * u.size_h, out_w = u.in_w * u.size_w;
  const int64_t y0 = y > 0 ? (y - 1) * u.size_h : 0, y1 = (y + 2) * u.size_h < out_h ? (y + 2) * u.size_h : out_h;
  const int64_t x0 = x > 0 ? (x - 1) * u.size_w : 0, x1 = (x + 2) * u.size_w < out_w ? (x + 2) * u.size_w : out_w;
  float sum = 0.0f;
  for (int64_t oy = y0; oy < y1; ++oy) {
    const float wy = bilinear_weight(bilinear_tap(oy, u.in_h, out_h), y);
    if (wy == 0.0f) continue;
    for (int64_t ox = x0; ox < x1; ++ox) {
      const float wx = bilinear_weight(bilinear_tap(ox, u.in_w, out_w), x);
      if (wx == 0.0f) continue;
      sum = add_rn(sum, mul_rn(mul_rn(dy[((r * out_h + oy) * out_w + ox) * u.channels + c], wy), wx));
    }
  }
  return sum;
}

// dx[r, y, x, c] of the nearest upsampling: the sum of its block of outputs, row by row.
KX_HOST_DEVICE inline float nearest_input_grad(const Upsample2d& u, const float* dy, int64_t r, int64_t y, int64_t x,
                                               int64_t c) {
  const int64_t out_h = u.in_h * u.size_h, out_w = u.in_w * u.size_w;
  float sum = 0.0f;
  for (int64_t a = 0; a < u.size_h; ++a)
    for (int64_t b = 0; b < u.size_w; ++b)
      sum = add_rn(sum, dy[((r * out_h + y * u.size_h + a) * out_w + x * u.size_w + b) * u.channels + c]);
  return sum;
}

}  // namespace kx::backend
