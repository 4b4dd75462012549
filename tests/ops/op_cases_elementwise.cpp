// The cases of the elementwise kernels, the optimizers' updates, rounding and the loss scale.
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "backend/rounding_math.hpp"
#include "ops/op_case_setups.hpp"

namespace kx::test::ops {

using backend::Backend;
using backend::LossScaleState;
using backend::Rounding;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfinity = std::numeric_limits<float>::infinity();

}  // namespace

// Whole floats, a part of one (bytes, not floats) and nothing: the rest keeps its values.
OpCall setup_fill_zero(OpIo& io) {
  float* p = io.inout("p", io.random(100));
  return [=](Backend& be) {
    be.fill_zero(37 * sizeof(float), p);
    be.fill_zero(10 * sizeof(float), p + 50);
    be.fill_zero(6, p + 70);
    be.fill_zero(0, p + 90);
  };
}

// A step seed read from memory; a second call draws elements 300 on, as a replica holding those rows.
OpCall setup_dropout_forward(OpIo& io) {
  const uint64_t* step_seed = io.in(std::vector<uint64_t>{static_cast<uint64_t>(io.random_index(INT64_MAX))});
  std::vector<OpCall> calls;
  struct Draw {
    float rate;
    int64_t first, n;
  };
  for (const Draw d : {Draw{0.3f, 0, 300}, Draw{0.5f, 300, 77}}) {
    const float* x = io.in(io.random(count(d.n)));
    const std::string from = " from " + std::to_string(d.first);
    float* mask = io.out("mask" + from, count(d.n));
    float* y = io.out("y" + from, count(d.n));
    calls.push_back([=](Backend& be) { be.dropout_forward(d.rate, step_seed, 5, d.first, d.n, x, mask, y); });
  }
  return in_order(std::move(calls));
}

// Keras's ReLU settings: ReLU6, leaky, thresholded with a slope and a cap, and a slope with a cap.
struct ReluSetting {
  float slope, max_value, threshold;
};
constexpr ReluSetting kReluSettings[] = {
    {0.0f, 6.0f, 0.0f}, {0.2f, INFINITY, 0.0f}, {0.1f, 0.7f, 0.3f}, {0.3f, 0.5f, 0.0f}};

OpCall setup_relu_general_forward(OpIo& io) {
  std::vector<OpCall> calls;
  const int64_t n = 300;
  for (const ReluSetting r : kReluSettings) {
    // Values across every kink: the cap is below 6, the scale puts some above.
    std::vector<float> values = io.random(count(n), -8.0f, 8.0f);
    const float* x = io.in(values);
    float* y = io.out("y slope " + std::to_string(r.slope) + " max " + std::to_string(r.max_value), count(n));
    calls.push_back([=](Backend& be) { be.relu_general_forward(n, r.slope, r.max_value, r.threshold, x, y); });
  }
  return in_order(std::move(calls));
}

OpCall setup_relu_general_backward(OpIo& io) {
  std::vector<OpCall> calls;
  const int64_t n = 300;
  for (const ReluSetting r : kReluSettings) {
    const float* x = io.in(io.random(count(n), -8.0f, 8.0f));
    const float* dy = io.in(io.random(count(n)));
    float* dx = io.out("dx slope " + std::to_string(r.slope) + " max " + std::to_string(r.max_value), count(n));
    calls.push_back([=](Backend& be) { be.relu_general_backward(n, r.slope, r.max_value, r.threshold, x, dy, dx); });
  }
  return in_order(std::move(calls));
}

namespace {

// Every element-wise activation (all but softmax).
std::vector<Activation> pointwise_activations() {
  std::vector<Activation> out;
  for (int a = 0; a < kActivationCount; ++a)
    if (static_cast<Activation>(a) != Activation::Softmax) out.push_back(static_cast<Activation>(a));
  return out;
}

// Random values, and the kinks and switches of the formulas: 0, relu6's 6, hard_sigmoid's -3 and 3,
// softplus's thresholds near +-13.94.
std::vector<float> activation_inputs(OpIo& io, int64_t n) {
  std::vector<float> v = io.random(count(n), -8.0f, 8.0f);
  const float special[] = {0.0f, 6.0f, -3.0f, 3.0f, -6.0f, 13.9f, 14.0f, -13.9f, -14.0f, 20.0f, -20.0f, -1e-3f};
  for (size_t i = 0; i < std::size(special); ++i) v[i * 7] = special[i];
  return v;
}

}  // namespace

// Each activation into its own y, and one over its x (allowed to alias).
OpCall setup_pointwise_activation_forward(OpIo& io) {
  const int64_t n = 150;
  std::vector<OpCall> calls;
  for (Activation act : pointwise_activations()) {
    const float* x = io.in(activation_inputs(io, n));
    float* y = io.out(std::string("y ") + activation_name(act), count(n));
    calls.push_back([=](Backend& be) { be.pointwise_activation_forward(act, n, x, y); });
  }
  float* in_place = io.inout("y over x gelu", activation_inputs(io, n));
  calls.push_back([=](Backend& be) { be.pointwise_activation_forward(Activation::Gelu, n, in_place, in_place); });
  return in_order(std::move(calls));
}

OpCall setup_pointwise_activation_backward(OpIo& io) {
  const int64_t n = 150;
  std::vector<OpCall> calls;
  for (Activation act : pointwise_activations()) {
    const float* x = io.in(activation_inputs(io, n));
    const float* dy = io.in(io.random(count(n)));
    float* dx = io.out(std::string("dx ") + activation_name(act), count(n));
    calls.push_back([=](Backend& be) { be.pointwise_activation_backward(act, n, x, dy, dx); });
  }
  const float* x = io.in(activation_inputs(io, n));
  float* in_place = io.inout("dx over dy hard_silu", io.random(count(n)));
  calls.push_back([=](Backend& be) { be.pointwise_activation_backward(Activation::HardSilu, n, x, in_place, in_place); });
  return in_order(std::move(calls));
}

namespace {

// Squeeze-and-excite's (H, W, C) * (1, 1, C), broadcasting both ways, equal shapes, and a scalar on
// either side.
struct BinaryCase {
  backend::BinaryOp op;
  std::vector<int64_t> dims, a_dims, b_dims;
  int32_t scalar_operand;
};
const BinaryCase kBinaryCases[] = {
    {backend::BinaryOp::Multiply, {4, 5, 3}, {4, 5, 3}, {1, 1, 3}, -1},
    {backend::BinaryOp::Add, {2, 4, 3}, {2, 1, 3}, {1, 4, 3}, -1},
    {backend::BinaryOp::Subtract, {6}, {6}, {6}, -1},
    {backend::BinaryOp::Divide, {3, 4}, {3, 4}, {3, 1}, -1},
    {backend::BinaryOp::Subtract, {3, 4}, {1, 1}, {3, 4}, 0},
    {backend::BinaryOp::Divide, {3, 4}, {3, 4}, {1, 1}, 1},
};

backend::BinaryShape binary_shape(const BinaryCase& c) {
  backend::BinaryShape s;
  s.op = c.op;
  s.rank = static_cast<int32_t>(c.dims.size());
  s.scalar_operand = c.scalar_operand;
  s.scalar = 1.75f;
  for (size_t k = 0; k < c.dims.size(); ++k) {
    s.dims[k] = c.dims[k];
    s.a_dims[k] = c.a_dims[k];
    s.b_dims[k] = c.b_dims[k];
  }
  return s;
}

int64_t product(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

}  // namespace

OpCall setup_binary_forward(OpIo& io) {
  const int64_t rows = 3;
  std::vector<OpCall> calls;
  int k = 0;
  for (const BinaryCase& c : kBinaryCases) {
    const backend::BinaryShape s = binary_shape(c);
    // Divisors away from zero.
    const float* a = c.scalar_operand == 0 ? nullptr : io.in(io.random(count(rows * product(c.a_dims)), 0.5f, 2.0f));
    const float* b = c.scalar_operand == 1 ? nullptr : io.in(io.random(count(rows * product(c.b_dims)), 0.5f, 2.0f));
    float* out = io.out("out of case " + std::to_string(k++), count(rows * product(c.dims)));
    calls.push_back([=](Backend& be) { be.binary_forward(s, rows, a, b, out); });
  }
  return in_order(std::move(calls));
}

OpCall setup_binary_backward(OpIo& io) {
  const int64_t rows = 3;
  std::vector<OpCall> calls;
  int k = 0;
  for (const BinaryCase& c : kBinaryCases) {
    const backend::BinaryShape s = binary_shape(c);
    const float* a = c.scalar_operand == 0 ? nullptr : io.in(io.random(count(rows * product(c.a_dims)), 0.5f, 2.0f));
    const float* b = c.scalar_operand == 1 ? nullptr : io.in(io.random(count(rows * product(c.b_dims)), 0.5f, 2.0f));
    const float* dy = io.in(io.random(count(rows * product(c.dims))));
    for (int32_t which = 0; which < 2; ++which) {
      if (which == c.scalar_operand) continue;
      const std::string name = std::string(which == 0 ? "da" : "db") + " of case " + std::to_string(k);
      float* d = io.out(name, count(rows * product(which == 0 ? c.a_dims : c.b_dims)));
      calls.push_back([=](Backend& be) { be.binary_backward(s, rows, which, a, b, dy, d); });
    }
    ++k;
  }
  return in_order(std::move(calls));
}

OpCall setup_scale_shift(OpIo& io) {
  const int64_t n = 190;
  const float* x = io.in(io.random(count(n)));
  float* y = io.out("y", count(n));
  float* in_place = io.inout("y over x", io.random(count(n)));
  return [=](Backend& be) {
    be.scale_shift(n, 1.0f / 127.5f, -1.0f, x, y);
    be.scale_shift(n, 0.5f, 0.25f, in_place, in_place);
  };
}

OpCall setup_multiply(OpIo& io) {
  const int64_t n = 257;
  const float* a = io.in(io.random(count(n)));
  const float* b = io.in(io.random(count(n)));
  float* out = io.out("out", count(n));
  return [=](Backend& be) { be.multiply(n, a, b, out); };
}

OpCall setup_copy(OpIo& io) {
  const int64_t n = 130;
  const float* src = io.in(io.random(count(n)));
  float* dst = io.out("dst", count(n));
  return [=](Backend& be) { be.copy(n, src, dst); };
}

// Into a third buffer, and into a (out aliasing it).
OpCall setup_add(OpIo& io) {
  const int64_t n = 200;
  const float* a = io.in(io.random(count(n)));
  const float* b = io.in(io.random(count(n)));
  float* out = io.out("out", count(n));
  float* a_and_out = io.inout("out over a", io.random(count(n)));
  return [=](Backend& be) {
    be.add(n, a, b, out);
    be.add(n, a_and_out, b, a_and_out);
  };
}

OpCall setup_scaled_difference(OpIo& io) {
  const int64_t n = 150;
  const float* a = io.in(io.random(count(n)));
  const float* b = io.in(io.random(count(n)));
  float* out = io.out("out", count(n));
  return [=](Backend& be) { be.scaled_difference(n, 0.75f, a, b, out); };
}

// Columns 2..4 of a [6, 7] matrix into columns 1..3 of a [6, 5] one; its other columns stay.
OpCall setup_copy_columns(OpIo& io) {
  const int64_t rows = 6, cols = 3, src_ld = 7, dst_ld = 5;
  const float* src = io.in(io.random(count(rows * src_ld)));
  float* dst = io.inout("dst", io.random(count(rows * dst_ld)));
  return [=](Backend& be) { be.copy_columns(rows, cols, src + 2, src_ld, dst + 1, dst_ld); };
}

// Plain, with momentum and a loss scale's factor, and skipped (factor 0: nothing written).
OpCall setup_sgd_update(OpIo& io) {
  const int64_t n = 100;
  const float* rate = io.in(std::vector<float>{0.1f});
  const float* g = io.in(io.random(count(n)));
  float* p = io.inout("p", io.random(count(n)));
  float* p_momentum = io.inout("p with momentum", io.random(count(n)));
  float* v = io.inout("v", io.random(count(n)));
  const float* half = io.in(std::vector<float>{0.5f});
  float* p_skipped = io.inout("p skipped", io.random(count(n)), {.written = false});
  float* v_skipped = io.inout("v skipped", io.random(count(n)), {.written = false});
  const float* zero = io.in(std::vector<float>{0.0f});
  return [=](Backend& be) {
    be.sgd_update(n, p, g, nullptr, rate, 0.0f, nullptr);
    be.sgd_update(n, p_momentum, g, v, rate, 0.9f, half);
    be.sgd_update(n, p_skipped, g, v_skipped, rate, 0.9f, zero);
  };
}

// Without a grad factor, with one, and skipped.
OpCall setup_adam_update(OpIo& io) {
  const int64_t n = 100;
  const float* rate = io.in(std::vector<float>{0.01f});
  const float* factor = io.in(std::vector<float>{0.25f});
  const float* zero = io.in(std::vector<float>{0.0f});
  std::vector<OpCall> calls;
  for (const float* grad_factor : {static_cast<const float*>(nullptr), factor, zero}) {
    const std::string which = grad_factor == nullptr ? "" : grad_factor == factor ? " scaled" : " skipped";
    const Check check{.written = grad_factor != zero};
    const float* g = io.in(io.random(count(n)));
    float* p = io.inout("p" + which, io.random(count(n)), check);
    float* m = io.inout("m" + which, io.random(count(n), -0.1f, 0.1f), check);
    float* v = io.inout("v" + which, io.random(count(n), 0.0f, 0.1f), check);
    calls.push_back([=](Backend& be) { be.adam_update(n, p, g, m, v, rate, 0.1f, 0.001f, 1e-7f, grad_factor); });
  }
  return in_order(std::move(calls));
}

OpCall setup_adamw_update(OpIo& io) {
  const int64_t n = 100;
  const float* rate_t = io.in(std::vector<float>{0.01f});
  const float* rate = io.in(std::vector<float>{0.002f});
  const float* factor = io.in(std::vector<float>{0.25f});
  const float* zero = io.in(std::vector<float>{0.0f});
  std::vector<OpCall> calls;
  for (const float* grad_factor : {static_cast<const float*>(nullptr), factor, zero}) {
    const std::string which = grad_factor == nullptr ? "" : grad_factor == factor ? " scaled" : " skipped";
    const Check check{.written = grad_factor != zero};
    const float* g = io.in(io.random(count(n)));
    float* p = io.inout("p" + which, io.random(count(n)), check);
    float* m = io.inout("m" + which, io.random(count(n), -0.1f, 0.1f), check);
    float* v = io.inout("v" + which, io.random(count(n), 0.0f, 0.1f), check);
    calls.push_back(
        [=](Backend& be) { be.adamw_update(n, p, g, m, v, rate_t, rate, 0.004f, 0.1f, 0.001f, 1e-7f, grad_factor); });
  }
  return in_order(std::move(calls));
}

// Plain, with momentum, centered, both; one call scaled and one skipped by a loss scale.
OpCall setup_rmsprop_update(OpIo& io) {
  const int64_t n = 100;
  const float* rate = io.in(std::vector<float>{0.01f});
  const float* factor = io.in(std::vector<float>{0.25f});
  const float* zero = io.in(std::vector<float>{0.0f});
  std::vector<OpCall> calls;
  for (int variant = 0; variant < 6; ++variant) {
    const bool momentum = variant % 2 == 1, centered = variant / 2 == 1 || variant >= 4;
    const float* grad_factor = variant == 4 ? factor : variant == 5 ? zero : nullptr;
    const std::string which = std::string(momentum ? " momentum" : "") + (centered ? " centered" : "") +
                              (variant == 4 ? " scaled" : variant == 5 ? " skipped" : "");
    const Check check{.written = grad_factor != zero};
    const float* g = io.in(io.random(count(n)));
    float* p = io.inout("p" + which, io.random(count(n)), check);
    float* v = io.inout("v" + which, io.random(count(n), 0.05f, 0.1f), check);
    float* m = momentum ? io.inout("m" + which, io.random(count(n), -0.1f, 0.1f), check) : nullptr;
    float* a = centered ? io.inout("a" + which, io.random(count(n), -0.1f, 0.1f), check) : nullptr;
    const backend::RmsPropConstants c{0.9f, 0.1f, momentum ? 0.5f : 0.0f, 1e-7f};
    calls.push_back([=](Backend& be) { be.rmsprop_update(n, p, g, v, m, a, rate, c, grad_factor); });
  }
  return in_order(std::move(calls));
}

// Rows in any order, one of them twice.
OpCall setup_gather_rows(OpIo& io) {
  const int64_t rows = 10, row_len = 6, n = 8;
  const float* src = io.in(io.random(count(rows * row_len)));
  std::vector<int64_t> picked(count(n));
  for (int64_t& i : picked) i = io.random_index(rows);
  picked[5] = picked[2];
  const int64_t* idx = io.in(picked);
  float* dst = io.out("dst", count(n * row_len));
  return [=](Backend& be) { be.gather_rows(src, row_len, idx, n, dst); };
}

// Both types over their whole range and past it, NaN, infinities, ties and float16's subnormals; and
// in place.
OpCall setup_round_to(OpIo& io) {
  std::vector<float> x = io.random(200, -70000.0f, 70000.0f);
  const std::vector<float> small = io.random(40, -1e-4f, 1e-4f);  // float16 subnormals and zeros
  x.insert(x.end(), small.begin(), small.end());
  x.insert(x.end(), {kNaN, kInfinity, -kInfinity, 65504.0f, 65519.0f, 65520.0f, -0.0f, 1e-8f,
                     backend::bits_float(0x3F808000u),  // halfway between two bfloat16
                     1.0f + 0x1p-11f});                 // halfway between two float16
  const int64_t n = static_cast<int64_t>(x.size());
  const float* in = io.in(x);
  std::vector<OpCall> calls;
  for (Rounding r : {Rounding::BFloat16, Rounding::Float16}) {
    float* y = io.out(r == Rounding::BFloat16 ? "bfloat16" : "float16", x.size(), {.finite = false});
    calls.push_back([=](Backend& be) { be.round_to(r, n, in, y); });
  }
  float* in_place = io.inout("float16 in place", io.random(100, -100.0f, 100.0f));
  calls.push_back([=](Backend& be) { be.round_to(Rounding::Float16, 100, in_place, in_place); });
  return in_order(std::move(calls));
}

OpCall setup_multiply_by(OpIo& io) {
  const int64_t n = 90;
  const float* factor = io.in(std::vector<float>{-1.5f});
  float* x = io.inout("x", io.random(count(n)));
  return [=](Backend& be) { be.multiply_by(n, factor, x); };
}

// Finite gradients leave the state alone; a NaN or an infinity clears finite; a state already cleared
// stays so.
OpCall setup_loss_scale_check(OpIo& io) {
  const int64_t n = 300;
  std::vector<float> finite = io.random(count(n), -1000.0f, 1000.0f), with_nan = finite, with_infinity = finite;
  with_nan[177] = kNaN;
  with_infinity[0] = -kInfinity;
  LossScaleState cleared;
  cleared.finite = 0.0f;
  struct Sub {
    const char* name;
    const std::vector<float>& g;
    LossScaleState state;
    bool written;
  };
  std::vector<OpCall> calls;
  for (const Sub& sub : {Sub{"finite", finite, {}, false}, Sub{"NaN", with_nan, {}, true},
                         Sub{"infinity", with_infinity, {}, true},
                         Sub{"finite, already cleared", finite, cleared, false}}) {
    const float* grads = io.in(sub.g);
    LossScaleState* s = io.inout_bytes(std::string("state after ") + sub.name, sub.state, {.written = sub.written});
    calls.push_back([=](Backend& be) { be.loss_scale_check(n, grads, s); });
  }
  return in_order(std::move(calls));
}

// A finite step counts, the last one before growth_steps doubles the scale, a non-finite one halves it.
OpCall setup_loss_scale_update(OpIo& io) {
  LossScaleState counting, growing, overflowed;
  counting.good_steps = 2;
  growing.growth_steps = 4;
  growing.good_steps = 3;
  overflowed.finite = 0.0f;
  overflowed.good_steps = 5;
  overflowed.grad_factor = overflowed.applied = 1.0f;
  LossScaleState* a = io.inout_bytes("counting", counting);
  LossScaleState* b = io.inout_bytes("growing", growing);
  LossScaleState* c = io.inout_bytes("overflowed", overflowed);
  return [=](Backend& be) {
    be.loss_scale_update(a);
    be.loss_scale_update(b);
    be.loss_scale_update(c);
  };
}

}  // namespace kx::test::ops
