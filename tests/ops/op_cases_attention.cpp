// Op cases of attention and layer normalisation: batched GEMMs with interleaved heads, layer
// normalisation forward and backward, and the causal mask.
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_case_setups.hpp"

namespace kx::test::ops {

using backend::Backend;
using backend::BatchedGemm;
using backend::Trans;

// Attention's three products on [samples, seq, heads, dim] tensors: scores = Q K^T per sample and head
// (the inner stride a head's columns), out = P V, and dP = dOut V^T accumulated onto C (beta 1).
OpCall setup_gemm_batched(OpIo& io) {
  const int64_t samples = 3, seq = 5, heads = 2, dim = 4;
  const int64_t width = heads * dim, tensor = samples * seq * width;
  const float* q = io.in(io.random(count(tensor)));
  const float* k = io.in(io.random(count(tensor)));
  const float* p = io.in(io.random(count(samples * heads * seq * seq), 0.0f, 1.0f));
  float* scores = io.out("scores = Q K^T", count(samples * heads * seq * seq));
  float* out = io.out("out = P V", count(tensor));
  float* accumulated = io.inout("C += P^T Q", io.random(count(samples * heads * seq * dim)));
  BatchedGemm qk;
  qk.ta = Trans::No, qk.tb = Trans::Yes, qk.M = seq, qk.N = seq, qk.K = dim, qk.lda = width, qk.ldb = width, qk.ldc = seq;
  qk.outer = samples, qk.inner = heads;
  qk.a_outer = qk.b_outer = seq * width, qk.a_inner = qk.b_inner = dim;
  qk.c_outer = heads * seq * seq, qk.c_inner = seq * seq;
  BatchedGemm pv;
  pv.M = seq, pv.N = dim, pv.K = seq, pv.lda = seq, pv.ldb = width, pv.ldc = width;
  pv.outer = samples, pv.inner = heads;
  pv.a_outer = heads * seq * seq, pv.a_inner = seq * seq, pv.b_outer = pv.c_outer = seq * width;
  pv.b_inner = pv.c_inner = dim;
  BatchedGemm acc;
  acc.ta = Trans::Yes, acc.M = seq, acc.N = dim, acc.K = seq, acc.lda = seq, acc.ldb = width, acc.ldc = dim;
  acc.outer = samples, acc.inner = heads, acc.a_outer = heads * seq * seq, acc.a_inner = seq * seq;
  acc.b_outer = seq * width, acc.b_inner = dim, acc.c_outer = heads * seq * dim, acc.c_inner = seq * dim;
  acc.beta = 1.0f;
  return in_order({[=](Backend& be) { be.gemm_batched(qk, q, k, scores); },
                   [=](Backend& be) { be.gemm_batched(pv, p, k, out); },
                   [=](Backend& be) { be.gemm_batched(acc, p, q, accumulated); }});
}

OpCall setup_layer_norm_forward(OpIo& io) {
  const int64_t rows = 9, cols = 37;
  const float* x = io.in(io.random(count(rows * cols), -3.0f, 5.0f));
  const float* gamma = io.in(io.random(count(cols), 0.5f, 1.5f));
  const float* beta = io.in(io.random(count(cols)));
  float* y = io.out("y", count(rows * cols));
  float* mean = io.out("mean", count(rows));
  float* inv_std = io.out("inv_std", count(rows));
  float* plain = io.out("y without gamma and beta", count(rows * cols));
  float* mean2 = io.out("mean without gamma and beta", count(rows));
  float* inv2 = io.out("inv_std without gamma and beta", count(rows));
  return [=](Backend& be) {
    be.layer_norm_forward(rows, cols, x, 1e-3f, gamma, beta, y, mean, inv_std);
    be.layer_norm_forward(rows, cols, x, 1e-6f, nullptr, nullptr, plain, mean2, inv2);
  };
}

OpCall setup_layer_norm_backward(OpIo& io) {
  const int64_t rows = 11, cols = 20;
  const std::vector<float> xs = io.random(count(rows * cols), -2.0f, 2.0f);
  std::vector<float> mean_of(count(rows)), inv_of(count(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    for (int64_t c = 0; c < cols; ++c) s += xs[count(r * cols + c)];
    const double m = s / cols;
    for (int64_t c = 0; c < cols; ++c) q += (xs[count(r * cols + c)] - m) * (xs[count(r * cols + c)] - m);
    mean_of[count(r)] = static_cast<float>(m);
    inv_of[count(r)] = static_cast<float>(1.0 / std::sqrt(q / cols + 1e-3));
  }
  const float* x = io.in(xs);
  const float* mean = io.in(mean_of);
  const float* inv_std = io.in(inv_of);
  const float* dy = io.in(io.random(count(rows * cols)));
  const float* gamma = io.in(io.random(count(cols), 0.5f, 1.5f));
  float* dx = io.out("dx", count(rows * cols));
  float* dgamma = io.out("dgamma", count(cols));
  float* dbeta = io.out("dbeta", count(cols));
  float* dx_plain = io.out("dx without gamma", count(rows * cols));
  return [=](Backend& be) {
    be.layer_norm_backward(rows, cols, x, dy, mean, inv_std, gamma, dx, dgamma, dbeta);
    be.layer_norm_backward(rows, cols, x, dy, mean, inv_std, nullptr, dx_plain, nullptr, nullptr);
  };
}

OpCall setup_causal_mask_add(OpIo& io) {
  const int64_t count_ = 6, rows = 5, cols = 7;
  float* scores = io.inout("scores", io.random(count(count_ * rows * cols)));
  return [=](Backend& be) { be.causal_mask_add(count_, rows, cols, -1e9f, scores); };
}

// A mask of zeros, ones and other values (NaN keeps its position, as Keras's cast to bool does), with
// and without the causal mask, and no mask with it alone.
OpCall setup_attention_mask_fill(OpIo& io) {
  const int64_t rows = 3, heads = 2, tq = 4, tv = 5;
  std::vector<float> mask_values(count(rows * tq * tv));
  for (size_t k = 0; k < mask_values.size(); ++k) mask_values[k] = k % 3 == 0 ? 0.0f : k % 7 == 1 ? NAN : k % 5 == 2 ? -0.5f : 1.0f;
  const float* mask = io.in(std::move(mask_values));
  float* masked = io.inout("masked scores", io.random(count(rows * heads * tq * tv)));
  float* both = io.inout("masked and causal", io.random(count(rows * heads * tq * tv)));
  float* causal = io.inout("causal alone", io.random(count(rows * heads * tq * tv)));
  return [=](Backend& be) {
    be.attention_mask_fill(rows, heads, tq, tv, mask, 0, -1e9f, masked);
    be.attention_mask_fill(rows, heads, tq, tv, mask, 1, 0.0f, both);
    be.attention_mask_fill(rows, heads, tq, tv, nullptr, 1, -2.5f, causal);
  };
}

}  // namespace kx::test::ops
