// One value of an LSTM or GRU step, forward and backward, shared by the CPU and the CUDA kernels
// (KX_HOST_DEVICE), with Keras 3's formulas (keras/src/layers/rnn/lstm.py, gru.py with reset_after):
//   LSTM: i, f, o = ra(z_i), ra(z_f), ra(z_o); g = a(z_g); c = f * c_prev + i * g; h = o * a(c)
//   GRU:  z = ra(x_z + r_z); r = ra(x_r + r_r); hh = a(x_h + r * r_h); h = z * h_prev + (1 - z) * hh
// Every operation is rounded on its own (rounded_math.hpp), so both devices give the same bits from the
// same inputs where the activations do (relu, linear); sigmoid and tanh use each platform's exp/tanh.
// A masked step (Keras's mask) carries h and c over unchanged.
#pragma once
#include <cmath>

#include "backend/activation_math.hpp"
#include "backend/backend.hpp"
#include "backend/host_device.hpp"
#include "backend/loss_math.hpp"
#include "backend/rounded_math.hpp"
#include "kx/layer.hpp"

namespace kx::backend {

// The activations a recurrent layer takes: linear, relu, sigmoid, tanh.
KX_HOST_DEVICE inline float recurrent_activate(Activation a, float x) {
  switch (a) {
    case Activation::Relu: return relu(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Tanh: return tanhf(x);
    default: return x;
  }
}
// dy times the activation's derivative, from its output y.
KX_HOST_DEVICE inline float recurrent_activation_grad(Activation a, float y, float dy) {
  switch (a) {
    case Activation::Relu: return relu_backward(y, dy);
    case Activation::Sigmoid: return sigmoid_backward(y, dy);
    case Activation::Tanh: return tanh_backward(y, dy);
    default: return dy;
  }
}

// The value of a row's mask (1 when there is none).
KX_HOST_DEVICE inline bool step_kept(const RecurrentStep& s, const float* mask, int64_t r) {
  return !mask || mask[r * s.mask_ld] != 0.0f;
}

// Unit j of row r of an LSTM step (backend_ops.hpp's lstm_step_forward).
KX_HOST_DEVICE inline void lstm_value_forward(const RecurrentStep& s, int64_t r, int64_t j, float* gates,
                                              const float* c_prev, const float* h_prev, const float* mask, float* c,
                                              float* h, float* y) {
  const int64_t u = s.units;
  float* z = gates + r * s.gates_ld;
  const float i = recurrent_activate(s.recurrent_activation, z[j]);
  const float f = recurrent_activate(s.recurrent_activation, z[u + j]);
  const float g = recurrent_activate(s.activation, z[2 * u + j]);
  const float o = recurrent_activate(s.recurrent_activation, z[3 * u + j]);
  z[j] = i, z[u + j] = f, z[2 * u + j] = g, z[3 * u + j] = o;
  const int64_t at = r * s.state_ld + j;
  const float cp = c_prev ? c_prev[at] : 0.0f, hp = h_prev ? h_prev[at] : 0.0f;
  const bool kept = step_kept(s, mask, r);
  const float c_new = add_rn(mul_rn(f, cp), mul_rn(i, g));
  const float h_new = mul_rn(o, recurrent_activate(s.activation, c_new));
  c[at] = kept ? c_new : cp;
  h[at] = kept ? h_new : hp;
  if (y) y[r * s.y_ld + j] = kept ? h_new : (s.zero_masked_output ? 0.0f : hp);
}

// Its gradient (lstm_step_backward): dh and dc are [rows, units].
KX_HOST_DEVICE inline void lstm_value_backward(const RecurrentStep& s, int64_t r, int64_t j, float* gates,
                                               const float* c_prev, const float* c, const float* mask, const float* dy,
                                               float* dh, float* dc) {
  const int64_t u = s.units;
  float* z = gates + r * s.gates_ld;
  const bool kept = step_kept(s, mask, r);
  float dh_t = dh[r * u + j];
  if (dy && (kept || !s.zero_masked_output)) dh_t = add_rn(dh_t, dy[r * s.y_ld + j]);
  if (!kept) {  // h and c passed through unchanged: their gradients go on to the step before
    z[j] = z[u + j] = z[2 * u + j] = z[3 * u + j] = 0.0f;
    dh[r * u + j] = dh_t;
    return;
  }
  const int64_t at = r * s.state_ld + j;
  const float i = z[j], f = z[u + j], g = z[2 * u + j], o = z[3 * u + j];
  const float cp = c_prev ? c_prev[at] : 0.0f;
  const float tc = recurrent_activate(s.activation, c[at]);
  const float dct = add_rn(dc[r * u + j], recurrent_activation_grad(s.activation, tc, mul_rn(dh_t, o)));
  z[j] = recurrent_activation_grad(s.recurrent_activation, i, mul_rn(dct, g));
  z[u + j] = recurrent_activation_grad(s.recurrent_activation, f, mul_rn(dct, cp));
  z[2 * u + j] = recurrent_activation_grad(s.activation, g, mul_rn(dct, i));
  z[3 * u + j] = recurrent_activation_grad(s.recurrent_activation, o, mul_rn(dh_t, tc));
  dc[r * u + j] = mul_rn(dct, f);
  dh[r * u + j] = 0.0f;
}

// Unit j of row r of a GRU step (gru_step_forward).
KX_HOST_DEVICE inline void gru_value_forward(const RecurrentStep& s, int64_t r, int64_t j, float* gates,
                                             const float* recurrent, const float* h_prev, const float* mask, float* h,
                                             float* y) {
  const int64_t u = s.units;
  float* x = gates + r * s.gates_ld;
  const float* rec = recurrent + r * s.recurrent_ld;
  const float z = recurrent_activate(s.recurrent_activation, add_rn(x[j], rec[j]));
  const float rg = recurrent_activate(s.recurrent_activation, add_rn(x[u + j], rec[u + j]));
  const float hh = recurrent_activate(s.activation, add_rn(x[2 * u + j], mul_rn(rg, rec[2 * u + j])));
  x[j] = z, x[u + j] = rg, x[2 * u + j] = hh;
  const int64_t at = r * s.state_ld + j;
  const float hp = h_prev ? h_prev[at] : 0.0f;
  const bool kept = step_kept(s, mask, r);
  const float h_new = add_rn(mul_rn(z, hp), mul_rn(sub_rn(1.0f, z), hh));
  h[at] = kept ? h_new : hp;
  if (y) y[r * s.y_ld + j] = kept ? h_new : (s.zero_masked_output ? 0.0f : hp);
}

// Its gradient (gru_step_backward): dh is [rows, units].
KX_HOST_DEVICE inline void gru_value_backward(const RecurrentStep& s, int64_t r, int64_t j, float* gates,
                                              float* recurrent, const float* h_prev, const float* mask,
                                              const float* dy, float* dh) {
  const int64_t u = s.units;
  float* x = gates + r * s.gates_ld;
  float* rec = recurrent + r * s.recurrent_ld;
  const bool kept = step_kept(s, mask, r);
  float dh_t = dh[r * u + j];
  if (dy && (kept || !s.zero_masked_output)) dh_t = add_rn(dh_t, dy[r * s.y_ld + j]);
  if (!kept) {
    x[j] = x[u + j] = x[2 * u + j] = 0.0f;
    rec[j] = rec[u + j] = rec[2 * u + j] = 0.0f;
    dh[r * u + j] = dh_t;
    return;
  }
  const float z = x[j], rg = x[u + j], hh = x[2 * u + j];
  const float hp = h_prev ? h_prev[r * s.state_ld + j] : 0.0f;
  const float dz = recurrent_activation_grad(s.recurrent_activation, z, mul_rn(dh_t, sub_rn(hp, hh)));
  const float dhh = recurrent_activation_grad(s.activation, hh, mul_rn(dh_t, sub_rn(1.0f, z)));
  const float dr = recurrent_activation_grad(s.recurrent_activation, rg, mul_rn(dhh, rec[2 * u + j]));
  x[j] = dz, x[u + j] = dr, x[2 * u + j] = dhh;
  rec[j] = dz, rec[u + j] = dr, rec[2 * u + j] = mul_rn(dhh, rg);
  dh[r * u + j] = mul_rn(dh_t, z);
}

}  // namespace kx::backend
