// Every layer kind other than Dense and Conv2D (those: test_mixed_precision.cpp, test_conv_layers.cpp)
// under the mixed_bfloat16 and mixed_float16 policies, one layer at a time: forward against the float64
// reference of the float32 layer tests, backward against finite differences of it, within the 16-bit
// type's precision.
//
// Each layer runs as the step plan runs it in a mixed policy: its inputs and dy are values of the type,
// its weights too where it autocasts them; what it stores is rounded to the type unless it says it
// stored it rounded already (rounds_output / rounds_input_grads), and that claim is checked: every
// such value must be exactly one of the type's. A model-level test then checks, through the real plan,
// that what predict returns in a mixed policy is made of 16-bit values and in float32 is not.
//
// Tolerances. u is the type's unit roundoff (half an ulp, relative): 2^-8 for bfloat16 (8 significant
// bits), 2^-11 for float16 (11). The float64 reference takes the same 16-bit inputs, so a value computed
// in float32 and rounded once is within u·|want| of it, plus float32's own error (2^-24 relative to the
// terms, a few of them): slack 2^-20·max(1, |want|), far below u. Backward through sigmoid, tanh and
// softmax reads the 16-bit y (as Keras's gradient of the cast output does): the error of y (≤ u·|y|)
// propagates through the derivative, a bound computed per element below.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "backend/backend.hpp"
#include "backend/rounding_math.hpp"
#include "core/layers/layer.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Rounding;
using test::Vec;

// The type's unit roundoff.
double unit_of(Rounding r) { return r == Rounding::BFloat16 ? 0x1p-8 : 0x1p-11; }
// float32's error on O(1) terms, well under either unit.
constexpr double kFloat32Slack = 0x1p-20;

std::vector<float> rounded(std::vector<float> v, Rounding r) {
  for (float& x : v) x = backend::round_value(x, r);
  return v;
}

// The first element of got that is not a value of the type, or -1.
template <class A>
long first_unrounded(const A& got, size_t n, Rounding r) {
  for (size_t i = 0; i < n; ++i)
    if (backend::round_value(static_cast<float>(got[i]), r) != static_cast<float>(got[i])) return static_cast<long>(i);
  return -1;
}

// |got - want| <= u·|want| + extra[i] + slack·max(1, |want|) for every element: the first failing index or -1.
template <class A>
long first_beyond(const A& got, const Vec& want, double u, const Vec& extra = {}) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], bound = u * std::fabs(w) + (extra.empty() ? 0.0 : extra[i]) +
                                      kFloat32Slack * std::max(1.0, std::fabs(w));
    if (!(std::fabs(static_cast<double>(got[i]) - w) <= bound)) return static_cast<long>(i);
  }
  return -1;
}

// A float64 model of a layer: the output for inputs xs and parameters w.
using Reference = std::function<Vec(const std::vector<Vec>& xs, const Vec& w)>;
// Extra tolerance of dx per element (the propagated error of a 16-bit y), from y's reference and dy.
using GradSlack = std::function<Vec(const Vec& want_y, const Vec& dy)>;

struct MixedRun {
  std::vector<float> y;
  std::vector<FloatBuffer> dxs;
  FloatBuffer dw, scratch;
};

struct MixedCheck {
  bool training = true;
  bool backward = true;   // false: forward only (inference, where no backward follows)
  bool check_w = false;   // weight gradients against finite differences (float32 ones: not rounded)
  GradSlack dx_slack;     // null: dx is the reference rounded once
  std::vector<std::vector<float>> inputs{};  // given inputs (rounded here), else random
  std::function<void(const float* scratch)> after_forward{};  // sees the layer's scratch (dropout's mask)
};

// Runs layer forward and backward as the plan does under rounding r and checks it (see the top).
MixedRun check_mixed(core::Layer& layer, const std::vector<Shape>& in_shapes, int64_t rows, std::vector<float> w,
                     Rounding r, const Reference& ref, const MixedCheck& opt = {}) {
  const double u = unit_of(r);
  auto be = backend::make_cpu_backend(2);
  const Shape out = layer.build_inputs(in_shapes);
  if (layer.autocasts_weights()) w = rounded(w, r);
  std::vector<FloatBuffer> xs;
  std::vector<const float*> x_ptrs;
  std::vector<Vec> xd;
  for (size_t k = 0; k < in_shapes.size(); ++k) {
    const size_t n = static_cast<size_t>(rows * num_elements(in_shapes[k]));
    std::vector<float> v = k < opt.inputs.size() ? opt.inputs[k] : test::random_floats(n, 200 + static_cast<uint32_t>(k));
    EXPECT_EQ(v.size(), n);
    xs.push_back(test::to_buffer(rounded(v, r)));
    x_ptrs.push_back(xs.back().data());
    xd.push_back(test::to_double(xs.back().data(), n));
  }
  const int64_t ny = rows * num_elements(out);
  MixedRun run;
  run.y.assign(static_cast<size_t>(ny), 0.0f);
  run.scratch = FloatBuffer(static_cast<size_t>(std::max<int64_t>(layer.scratch_floats(rows), 1)));
  FloatBuffer wb = test::to_buffer(w.empty() ? std::vector<float>{0.0f} : w);
  uint64_t step_seed = 5;
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x_ptrs[0];
  c.xs = x_ptrs.data();
  c.y = run.y.data();
  c.w = wb.data();
  c.scratch = run.scratch.data();
  FloatBuffer workspace(static_cast<size_t>(std::max<int64_t>(layer.workspace_floats_on(*be, rows), 1)));
  c.workspace = workspace.data();
  c.training = opt.training;
  c.step_seed = &step_seed;
  c.rounding = r;
  layer.forward(c);
  if (opt.after_forward) opt.after_forward(run.scratch.data());
  if (layer.rounds_output(false)) {
    EXPECT_EQ(first_unrounded(run.y, run.y.size(), r), -1) << "the layer says it stores 16-bit outputs";
  } else {
    be->round_to(r, ny, run.y.data(), run.y.data());  // the plan's rounding
  }
  const Vec wd(w.begin(), w.end());
  const Vec want = ref(xd, wd);
  EXPECT_EQ(want.size(), static_cast<size_t>(ny));
  EXPECT_EQ(first_beyond(run.y, want, u), -1) << "forward";
  if (!opt.backward) return run;

  const std::vector<float> dyv = rounded(test::random_floats(static_cast<size_t>(ny), 99), r);
  FloatBuffer dy = test::to_buffer(dyv);
  const Vec dyd(dyv.begin(), dyv.end());
  std::vector<float*> dx_ptrs;
  for (const FloatBuffer& x : xs) run.dxs.emplace_back(x.size());
  for (FloatBuffer& b : run.dxs) dx_ptrs.push_back(b.data());
  run.dw = FloatBuffer(std::max<size_t>(w.size(), 1));
  c.dy = dy.data();
  c.dx = dx_ptrs[0];
  c.dxs = dx_ptrs.data();
  c.dw = run.dw.data();
  layer.backward(c);
  const Vec slack = opt.dx_slack ? opt.dx_slack(want, dyd) : Vec{};
  for (size_t k = 0; k < xs.size(); ++k) {
    FloatBuffer& dx = run.dxs[k];
    if (layer.rounds_input_grads(false)) {
      EXPECT_EQ(first_unrounded(dx, dx.size(), r), -1) << "the layer says it stores 16-bit gradients of input " << k;
    } else {
      be->round_to(r, static_cast<int64_t>(dx.size()), dx.data(), dx.data());
    }
    const Vec g = test::numeric_gradient(
        [&](const Vec& v) {
          std::vector<Vec> in = xd;
          in[k] = v;
          return test::dot(dyd, ref(in, wd));
        },
        xd[k]);
    // Elementwise layers: one dx per y, so the per-element slack applies; else none is given.
    EXPECT_EQ(first_beyond(dx, g, u, slack.size() == g.size() ? slack : Vec{}), -1) << "gradient of input " << k;
  }
  if (opt.check_w && !w.empty()) {
    const Vec g = test::numeric_gradient([&](const Vec& v) { return test::dot(dyd, ref(xd, v)); }, wd);
    EXPECT_EQ(test::first_mismatch(run.dw, g, g.size(), 1e-5), -1) << "parameter gradient (float32)";
  }
  return run;
}

LayerSpec spec_of(LayerKind kind, const char* name) {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  return s;
}

struct Policy {
  Rounding rounding;
  const char* name;
};

class MixedLayerTest : public ::testing::TestWithParam<Policy> {
 protected:
  Rounding r() const { return GetParam().rounding; }
};

TEST_P(MixedLayerTest, AveragePooling) {
  LayerSpec s = spec_of(LayerKind::AveragePooling2D, "avg");
  s.pool_h = 2;
  s.pool_w = 3;
  s.pool_stride_h = 1;
  s.pool_stride_w = 2;
  auto layer = core::make_layer(s);
  const int64_t rows = 2, H = 5, W = 7, C = 3;
  check_mixed(*layer, {{H, W, C}}, rows, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
    return test::pool2d_reference(x[0], rows, H, W, C, 2, 3, 1, 2, false);
  });
}

// Max pooling, overlapping (its gradients add up: the plan rounds them) and not (each dx is a dy or 0:
// the layer says they are 16-bit). Distinct inputs (k/128, all values of both types): no ties.
TEST_P(MixedLayerTest, MaxPooling) {
  for (const int64_t stride : {2, 3}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    LayerSpec s = spec_of(LayerKind::MaxPooling2D, "max");
    s.pool_h = s.pool_w = 3;
    s.pool_stride_h = s.pool_stride_w = stride;
    auto layer = core::make_layer(s);
    const int64_t rows = 2, H = 7, W = 6, C = 2;
    std::vector<float> x(static_cast<size_t>(rows * H * W * C));
    std::iota(x.begin(), x.end(), -80.0f);
    std::shuffle(x.begin(), x.end(), std::mt19937(4));
    for (float& v : x) v /= 128;
    MixedCheck opt;
    opt.inputs = {x};
    check_mixed(*layer, {{H, W, C}}, rows, {}, r(), [&](const std::vector<Vec>& in, const Vec&) {
      return test::pool2d_reference(in[0], rows, H, W, C, 3, 3, stride, stride, true);
    }, opt);
  }
}

TEST_P(MixedLayerTest, GlobalAveragePooling) {
  auto layer = core::make_layer(spec_of(LayerKind::GlobalAveragePooling2D, "gap"));
  const int64_t rows = 3, H = 4, W = 5, C = 6;
  check_mixed(*layer, {{H, W, C}}, rows, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
    return test::pool2d_reference(x[0], rows, H, W, C, H, W, 1, 1, false);
  });
}

TEST_P(MixedLayerTest, ZeroPadding) {
  LayerSpec s = spec_of(LayerKind::ZeroPadding2D, "pad");
  s.pad_top = 1;
  s.pad_bottom = 2;
  s.pad_left = 0;
  s.pad_right = 3;
  auto layer = core::make_layer(s);
  const int64_t rows = 2, H = 3, W = 4, C = 2, OH = 6, OW = 7;
  check_mixed(*layer, {{H, W, C}}, rows, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(static_cast<size_t>(rows * OH * OW * C), 0.0);
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t c = 0; c < C; ++c)
            y[static_cast<size_t>(((n * OH + i + 1) * OW + j) * C + c)] = x[0][static_cast<size_t>(((n * H + i) * W + j) * C + c)];
    return y;
  });
}

// Batch normalisation computes in float32 from its float32 weights (Keras's too); its output and dx
// are rounded to the type, its gamma and beta gradients are float32.
TEST_P(MixedLayerTest, BatchNormalizationInTraining) {
  LayerSpec s = spec_of(LayerKind::BatchNormalization, "bn");
  s.epsilon = 1e-3f;
  auto layer = core::make_layer(s);
  const int64_t rows = 3, H = 2, W = 3, C = 4, n = rows * H * W;
  EXPECT_FALSE(layer->autocasts_weights());
  std::vector<float> w = test::random_floats(C, 5, 0.5f, 1.5f);
  for (float v : test::random_floats(C, 6)) w.push_back(v);
  for (float v : test::random_floats(C, 7)) w.push_back(v);
  for (float v : test::random_floats(C, 8, 0.5f, 2.0f)) w.push_back(v);
  const MixedRun run = check_mixed(*layer, {{H, W, C}}, rows, w, r(), [&](const std::vector<Vec>& x, const Vec& wv) {
    return test::batch_norm_reference(x[0], wv, n, C, s.epsilon);
  });
  // gamma and beta: float32 gradients of the 16-bit x and dy, against finite differences.
  const Vec x = test::to_double(rounded(test::random_floats(static_cast<size_t>(n * C), 200), r()).data(), n * C);
  const Vec dy = test::to_double(rounded(test::random_floats(static_cast<size_t>(n * C), 99), r()).data(), n * C);
  const Vec wd(w.begin(), w.end());
  long any_unrounded = 0;
  for (int64_t k = 0; k < 2 * C; ++k) {
    const Vec g = test::numeric_gradient(
        [&](const Vec& v) {
          Vec full = wd;
          full[static_cast<size_t>(k)] = v[0];
          return test::dot(dy, test::batch_norm_reference(x, full, n, C, s.epsilon));
        },
        Vec{wd[static_cast<size_t>(k)]});
    EXPECT_NEAR(run.dw[k], g[0], 1e-5 * std::max(1.0, std::fabs(g[0]))) << "gamma/beta " << k;
    any_unrounded += backend::round_value(run.dw[k], r()) != run.dw[k];
  }
  EXPECT_GT(any_unrounded, 0) << "gamma and beta's gradients are float32, not rounded to the type";
}

// Frozen (trainable false): it normalises with the moving statistics in training too, and backward is
// the affine map's (the inference forward, with a backward).
TEST_P(MixedLayerTest, BatchNormalizationFrozen) {
  LayerSpec s = spec_of(LayerKind::BatchNormalization, "bn");
  s.trainable = false;
  auto layer = core::make_layer(s);
  const int64_t rows = 4, C = 3;
  std::vector<float> w = test::random_floats(C, 5, 0.5f, 1.5f);
  for (float v : test::random_floats(C, 6)) w.push_back(v);
  for (float v : test::random_floats(C, 7)) w.push_back(v);
  for (float v : test::random_floats(C, 8, 0.5f, 2.0f)) w.push_back(v);
  check_mixed(*layer, {{C}}, rows, w, r(), [&](const std::vector<Vec>& x, const Vec& wv) {
    Vec y(x[0].size());
    for (size_t i = 0; i < y.size(); ++i) {
      const size_t k = i % C;
      y[i] = (x[0][i] - wv[2 * C + k]) * wv[k] / std::sqrt(wv[3 * C + k] + static_cast<double>(s.epsilon)) + wv[C + k];
    }
    return y;
  });
}

// Normalization autocasts its statistics (Keras casts them to the compute type): the reference takes
// the rounded ones.
TEST_P(MixedLayerTest, Normalization) {
  const int64_t rows = 3, H = 2, W = 3, C = 4;
  LayerSpec s = spec_of(LayerKind::Normalization, "norm");
  s.mean = test::random_floats(C, 5);
  s.variance = test::random_floats(C, 6, 0.2f, 3.0f);
  auto layer = core::make_layer(s);
  std::vector<float> w = s.mean;
  w.insert(w.end(), s.variance.begin(), s.variance.end());
  check_mixed(*layer, {{H, W, C}}, rows, w, r(), [&](const std::vector<Vec>& x, const Vec& wv) {
    const std::vector<float> mean(wv.begin(), wv.begin() + C), var(wv.begin() + C, wv.end());
    return test::normalization_reference(x[0], mean, var, C);
  });
}

TEST_P(MixedLayerTest, Add) {
  auto layer = core::make_layer(spec_of(LayerKind::Add, "add"));
  check_mixed(*layer, {{3, 4}, {3, 4}, {3, 4}}, 2, {}, r(), [](const std::vector<Vec>& x, const Vec&) {
    Vec y(x[0].size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[1][i] + x[2][i];
    return y;
  });
}

TEST_P(MixedLayerTest, Concatenate) {
  auto layer = core::make_layer(spec_of(LayerKind::Concatenate, "cat"));
  const int64_t rows = 2, P = 3;
  check_mixed(*layer, {{P, 2}, {P, 5}}, rows, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
    return test::concatenate_reference(x[0], x[1], rows * P, 2, 5);
  });
}

// Layer normalisation computes in float32 from 16-bit x and its autocast gamma and beta; y and dx are
// rounded once.
TEST_P(MixedLayerTest, LayerNormalization) {
  LayerSpec s = spec_of(LayerKind::LayerNormalization, "ln");
  auto layer = core::make_layer(s);
  EXPECT_TRUE(layer->autocasts_weights());
  const int64_t rows = 3, T = 2, F = 6;
  std::vector<float> w = test::random_floats(F, 5, 0.5f, 1.5f);
  for (float v : test::random_floats(F, 6)) w.push_back(v);
  check_mixed(*layer, {{T, F}}, rows, rounded(w, r()), r(), [&](const std::vector<Vec>& x, const Vec& wv) {
    Vec y(x[0].size());
    for (size_t p = 0; p < y.size() / F; ++p) {
      double m = 0, v = 0;
      for (int64_t c = 0; c < F; ++c) m += x[0][p * F + c] / F;
      for (int64_t c = 0; c < F; ++c) v += (x[0][p * F + c] - m) * (x[0][p * F + c] - m) / F;
      for (int64_t c = 0; c < F; ++c)
        y[p * F + c] = (x[0][p * F + c] - m) / std::sqrt(v + static_cast<double>(1e-3f)) * wv[c] + wv[F + c];
    }
    return y;
  });
}

// Attention chains GEMMs, each rounded to the type (as Keras's float16 einsums are), so it is judged as
// a whole: through the real plan, a mixed model's outputs are values of the type and near the float32
// model's on the same rounded inputs (within 16 units: a handful of roundings in a row); and a training
// step leaves finite weights.
TEST(MixedLayerModel, MultiHeadAttentionStaysNearFloat32AndTrains) {
  const Shape in{6, 8};
  const int64_t n = 4;
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * num_elements(in)), 41);
  const auto model = [&](Precision p) {
    Strategy st = Strategy::default_strategy();
    st.set_num_threads(2);
    Model m = Model::functional(st, in, "x");
    m.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"name": "att", "num_heads": 2, "key_dim": 4},
                   "kwargs": {"use_causal_mask": true}})",
                {"x", "x"});
    m.add_layer(R"({"class_name": "LayerNormalization", "config": {"name": "ln"}})", {"att"});
    CompileOptions co;
    co.loss.kind = LossKind::MeanSquaredError;
    co.precision = p;
    m.compile(co);
    return m;
  };
  Model f32 = model(Precision::Float32);
  for (const auto& [p, r] : {std::pair{Precision::MixedBfloat16, Rounding::BFloat16},
                             std::pair{Precision::MixedFloat16, Rounding::Float16}}) {
    SCOPED_TRACE(precision_name(p));
    Model mixed = model(p);
    mixed.set_weights(f32.get_weights());
    const std::vector<float> xr = rounded(x, r);
    const std::vector<float> want32 = f32.predict(xr.data(), n);
    const std::vector<float> got = mixed.predict(x.data(), n);
    ASSERT_EQ(got.size(), want32.size());
    EXPECT_EQ(first_unrounded(got, got.size(), r), -1) << "an output that is not a value of the type";
    EXPECT_EQ(first_beyond(got, Vec(want32.begin(), want32.end()), 16 * unit_of(r), Vec(got.size(), 16 * unit_of(r))),
              -1)
        << "far from float32's";
    const std::vector<float> y = test::random_floats(static_cast<size_t>(n * num_elements(in)), 42);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 6, 8}, y.data(), DType::F32, {n, 6, 8});
    d.batch(n, true);
    FitOptions one;
    one.epochs = 1;
    mixed.fit(d, one, nullptr, nullptr);
    for (float v : mixed.get_weights()) ASSERT_TRUE(std::isfinite(v));
  }
}

// Dropout: the identity in inference (forward only); in training y = x * mask (mask 0 or 1/(1 - rate), not a 16-bit
// value for rate 0.3: the plan rounds y), dx = dy * mask.
TEST_P(MixedLayerTest, Dropout) {
  LayerSpec s = spec_of(LayerKind::Dropout, "drop");
  s.rate = 0.3f;
  for (const bool training : {false, true}) {
    SCOPED_TRACE(training ? "training" : "inference");
    auto layer = core::make_layer(s);
    const int64_t rows = 4, n = 50;
    MixedCheck opt;
    opt.training = training;
    opt.backward = training;
    // The mask the layer draws is known after forward; the reference reads it from the layer's scratch.
    const float* mask = nullptr;
    opt.after_forward = [&](const float* scratch) { mask = scratch; };
    check_mixed(*layer, {{n}}, rows, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
      if (!training) return x[0];
      Vec y(x[0].size());
      for (size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * (mask ? mask[i] : 0.0);
      return y;
    }, opt);
  }
}

// Keras's activations after softmax, whose gradients come from the 16-bit x: dx is the float32
// product rounded once.
TEST_P(MixedLayerTest, KerasActivations) {
  for (int a = static_cast<int>(Activation::Relu6); a < kActivationCount; ++a) {
    const auto act = static_cast<Activation>(a);
    SCOPED_TRACE(activation_name(act));
    LayerSpec s = spec_of(LayerKind::Activation, "act");
    s.activation = act;
    auto layer = core::make_layer(s);
    check_mixed(*layer, {{2, 4}}, 3, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
      Vec y = x[0];
      for (double& v : y) v = test::keras_activation(act, v);
      return y;
    });
  }
}

// Squeeze-and-excite's broadcast product, and x * 2.5 + nothing else: a TensorOperation.
TEST_P(MixedLayerTest, MultiplyAndTensorOperation) {
  auto multiply = core::make_layer(spec_of(LayerKind::Multiply, "multiply"));
  check_mixed(*multiply, {{3, 2}, {1, 2}}, 2, {}, r(), [](const std::vector<Vec>& x, const Vec&) {
    Vec y(x[0].size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * x[1][(i / 6) * 2 + i % 2];
    return y;
  });
  LayerSpec op = spec_of(LayerKind::TensorOperation, "op");
  op.config = R"({"operation": "Multiply", "arguments": [null, 2.5]})";
  auto scaled = core::make_layer(op);
  check_mixed(*scaled, {{5}}, 2, {}, r(), [](const std::vector<Vec>& x, const Vec&) {
    Vec y = x[0];
    for (double& v : y) v *= 2.5;
    return y;
  });
}

// Rescaling per channel: Keras casts the scales to the compute type before it multiplies, so the
// reference takes them rounded (offsets 0, whose sum would round a second time).
TEST_P(MixedLayerTest, RescalingPerChannel) {
  LayerSpec s = spec_of(LayerKind::Rescaling, "rescaling");
  s.config = R"({"scale": [2.0896, -0.47, 0.2108], "offset": [0, 0, 0]})";
  auto layer = core::make_layer(s);
  const std::vector<float> scale = rounded({2.0896f, -0.47f, 0.2108f}, r());
  check_mixed(*layer, {{2, 3}}, 2, {}, r(), [&](const std::vector<Vec>& x, const Vec&) {
    Vec y = x[0];
    for (size_t i = 0; i < y.size(); ++i) y[i] *= scale[i % 3];
    return y;
  });
}

// Masking only passes values: the identity where nothing is masked. Keras compares in the compute type,
// so mask_value 0.1 masks steps of 0.1 rounded to the type (which are not float32's 0.1).
TEST_P(MixedLayerTest, MaskingPassesValuesAndComparesInTheType) {
  LayerSpec s = spec_of(LayerKind::Masking, "masking");
  s.config = R"({"mask_value": 0.1})";
  auto layer = core::make_layer(s);
  check_mixed(*layer, {{3, 2}}, 2, {}, r(), [](const std::vector<Vec>& x, const Vec&) { return x[0]; });
  layer->build({2, 2});
  const float v = rounded({0.1f}, r())[0];
  ASSERT_NE(v, 0.1f);
  const std::vector<float> x = {v, v, 0.5f, v};
  std::vector<float> y(4, 7.0f), mask(2, 7.0f);
  auto be = backend::make_cpu_backend(1);
  core::LayerContext c;
  c.be = be.get();
  c.rows = 1;
  c.x = x.data();
  c.y = y.data();
  c.scratch = mask.data();
  c.rounding = r();
  layer->forward(c);
  EXPECT_EQ(mask, std::vector<float>({0.0f, 1.0f}));
  EXPECT_EQ(y, std::vector<float>({0.0f, 0.0f, 0.5f, v}));
}

struct ActivationCase {
  Activation act;
  Rounding rounding;
  const char* name;
};

class MixedActivationTest : public ::testing::TestWithParam<ActivationCase> {};

// y = act(x) over the last axis (Dense with the identity kernel in float64). Backward reads the 16-bit y:
// dx's extra error per element, |dy| times the derivative's change over y's error (≤ u·|y|), doubled to
// cover the second-order terms:
//   sigmoid  y(1-y):          |1-2y| · u|y| · |dy|
//   tanh     1-y^2:           2|y| · u|y| · |dy|
//   softmax  y_i(dy_i - s):   u·y_i·|dy_i - s| + y_i·Σ_j u·y_j·|dy_j|   (s = Σ_j y_j dy_j)
TEST_P(MixedActivationTest, ForwardAndBackwardMatchFloat64WithinTheTypesPrecision) {
  const auto [act, rounding, name] = GetParam();
  const double u = unit_of(rounding);
  LayerSpec s = spec_of(LayerKind::Activation, "act");
  s.activation = act;
  auto layer = core::make_layer(s);
  const int64_t rows = 3, P = 2, C = 4;
  Vec eye(static_cast<size_t>(C * C), 0.0);
  for (int64_t k = 0; k < C; ++k) eye[static_cast<size_t>(k * C + k)] = 1;
  MixedCheck opt;
  opt.dx_slack = [&](const Vec& y, const Vec& dy) {
    Vec e(y.size(), 0.0);
    for (size_t i = 0; i < y.size(); ++i) {
      const double a = std::fabs(y[i]);
      if (act == Activation::Sigmoid) e[i] = std::fabs(1 - 2 * y[i]) * u * a * std::fabs(dy[i]);
      if (act == Activation::Tanh) e[i] = 2 * a * u * a * std::fabs(dy[i]);
      if (act == Activation::Softmax) {
        const size_t row = i / C * C;
        double sum = 0, mag = 0;
        for (size_t j = row; j < row + C; ++j) sum += y[j] * dy[j], mag += u * y[j] * std::fabs(dy[j]);
        e[i] = u * a * std::fabs(dy[i] - sum) + a * mag;
      }
      e[i] *= 2;
    }
    return e;
  };
  check_mixed(*layer, {{P, C}}, rows, {}, rounding, [&](const std::vector<Vec>& x, const Vec&) {
    return test::dense_forward(x[0], eye, Vec(static_cast<size_t>(C), 0.0), rows * P, C, C, act);
  }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Functions, MixedActivationTest,
    ::testing::Values(ActivationCase{Activation::Relu, Rounding::BFloat16, "relu_bf16"},
                      ActivationCase{Activation::Sigmoid, Rounding::BFloat16, "sigmoid_bf16"},
                      ActivationCase{Activation::Tanh, Rounding::BFloat16, "tanh_bf16"},
                      ActivationCase{Activation::Softmax, Rounding::BFloat16, "softmax_bf16"},
                      ActivationCase{Activation::Relu, Rounding::Float16, "relu_f16"},
                      ActivationCase{Activation::Sigmoid, Rounding::Float16, "sigmoid_f16"},
                      ActivationCase{Activation::Tanh, Rounding::Float16, "tanh_f16"},
                      ActivationCase{Activation::Softmax, Rounding::Float16, "softmax_f16"}),
    [](const auto& info) { return std::string(info.param.name); });

// Through the real step plan: a one-layer model's predict in a mixed policy rounds the input, runs the
// layer and rounds what it stores, so every output is a value of the type and within u of the float32
// model's output on the rounded input; in float32 the same outputs are not all 16-bit values (so the
// check can fail).
TEST(MixedLayerModel, PredictStoresValuesOfTheTypeForEveryLayerKind) {
  const Shape in{4, 4, 3};
  const int64_t n = 5;
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * num_elements(in)), 31);
  std::vector<LayerSpec> specs;
  LayerSpec avg = spec_of(LayerKind::AveragePooling2D, "avg");
  avg.pool_h = avg.pool_w = 3;
  avg.pool_stride_h = avg.pool_stride_w = 1;
  specs.push_back(avg);
  specs.push_back(spec_of(LayerKind::GlobalAveragePooling2D, "gap"));
  specs.push_back(spec_of(LayerKind::BatchNormalization, "bn"));
  LayerSpec norm = spec_of(LayerKind::Normalization, "norm");
  // Statistics that are 16-bit values: the mixed layer autocasts them, the float32 one does not.
  norm.mean = {0.125f, -0.375f, 0.75f};
  norm.variance = {1.75f, 0.3125f, 2.875f};
  specs.push_back(norm);
  for (Activation a : {Activation::Sigmoid, Activation::Tanh, Activation::Softmax, Activation::Silu, Activation::Gelu,
                       Activation::Softplus}) {
    LayerSpec act = spec_of(LayerKind::Activation, "act");
    act.activation = a;
    specs.push_back(act);
  }
  LayerSpec drop = spec_of(LayerKind::Dropout, "drop");
  drop.rate = 0.3f;
  specs.push_back(drop);
  const auto model = [&](const LayerSpec& spec, Precision p) {
    Strategy st = Strategy::default_strategy();
    st.set_num_threads(2);
    Model m = Model::sequential(st, in);
    m.add(spec);
    CompileOptions co;
    co.loss.kind = LossKind::MeanSquaredError;
    co.precision = p;
    m.compile(co);
    return m;
  };
  for (const LayerSpec& spec : specs) {
    SCOPED_TRACE(spec.name + (spec.kind == LayerKind::Activation ? std::string(" ") + activation_name(spec.activation) : ""));
    Model f32 = model(spec, Precision::Float32);
    const std::vector<float> p32 = f32.predict(x.data(), n);
    EXPECT_GE(first_unrounded(p32, p32.size(), Rounding::BFloat16), 0) << "float32 stores float32 values";
    for (const auto& [p, r] : {std::pair{Precision::MixedBfloat16, Rounding::BFloat16},
                               std::pair{Precision::MixedFloat16, Rounding::Float16}}) {
      SCOPED_TRACE(precision_name(p));
      const std::vector<float> xr = rounded(x, r);
      const std::vector<float> want32 = f32.predict(xr.data(), n);
      Model mixed = model(spec, p);
      const std::vector<float> got = mixed.predict(x.data(), n);
      ASSERT_EQ(got.size(), want32.size());
      EXPECT_EQ(first_unrounded(got, got.size(), r), -1) << "an output that is not a value of the type";
      EXPECT_EQ(first_beyond(got, Vec(want32.begin(), want32.end()), unit_of(r)), -1) << "far from float32's";
    }
  }
}

// The convolutions and resampling layers of issue 34 (their float32 forms: tests/unit/layers), each in
// a model under both policies against the same model in float32 with the same weights: predict and one
// training step's loss and weights stay within a few units of the type (their products and sums run in
// float32 from 16-bit values, the intermediate tensors Keras holds in the type are rounded to it).
TEST(MixedLayerModel, ConvolutionsAndResamplingFollowFloat32) {
  struct Case {
    const char* layer;
    Shape in;
  };
  const Case cases[] = {
      {R"({"class_name": "SeparableConv2D", "config": {"filters": 4, "kernel_size": 3, "padding": "same",
          "depth_multiplier": 2, "activation": "relu"}})", {6, 5, 3}},
      {R"({"class_name": "Conv2DTranspose", "config": {"filters": 3, "kernel_size": 3, "strides": 2,
          "activation": "tanh"}})", {3, 4, 2}},
      {R"({"class_name": "UpSampling2D", "config": {"size": [2, 3]}})", {3, 4, 2}},
      {R"({"class_name": "UpSampling2D", "config": {"interpolation": "bilinear"}})", {3, 4, 2}},
      {R"({"class_name": "Conv1D", "config": {"filters": 4, "kernel_size": 3, "padding": "causal",
          "dilation_rate": 2}})", {9, 3}},
      {R"({"class_name": "DepthwiseConv2D", "config": {"kernel_size": 3, "padding": "same", "dilation_rate": 2,
          "depth_multiplier": 2}})", {7, 6, 2}},
      {R"({"class_name": "Conv2D", "config": {"filters": 3, "kernel_size": [3, 2], "dilation_rate": [2, 3],
          "activation": "relu"}})", {7, 8, 2}},
      {R"({"class_name": "MaxPooling1D", "config": {"pool_size": 3, "strides": 1}})", {9, 3}},
      {R"({"class_name": "AveragePooling1D", "config": {}})", {9, 3}},
      {R"({"class_name": "GlobalAveragePooling1D", "config": {"keepdims": true}})", {9, 3}},
  };
  const int64_t n = 6;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.layer);
    const auto model = [&](Precision p) {
      Strategy st = Strategy::default_strategy();
      st.set_num_threads(2);
      Model m = Model::sequential(st, k.in);
      m.add_layer(k.layer);
      m.add_layer(R"({"class_name": "Flatten", "config": {}})");
      m.add_layer(R"({"class_name": "Dense", "config": {"units": 3}})");
      CompileOptions co;
      co.loss.kind = LossKind::MeanSquaredError;
      co.optimizer.kind = OptimizerKind::Sgd;
      co.precision = p;
      co.seed = 3;
      m.compile(co);
      return m;
    };
    Model f32 = model(Precision::Float32);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(n * num_elements(k.in)), 41);
    const std::vector<float> y = test::random_floats(static_cast<size_t>(n * 3), 42);
    for (const auto& [p, r] : {std::pair{Precision::MixedBfloat16, Rounding::BFloat16},
                               std::pair{Precision::MixedFloat16, Rounding::Float16}}) {
      SCOPED_TRACE(precision_name(p));
      const double tol = 16 * unit_of(r);
      const std::vector<float> xr = rounded(x, r), w = rounded(f32.get_weights(), r);
      Model reference = model(Precision::Float32), mixed = model(p);
      reference.set_weights(w);
      mixed.set_weights(w);
      const std::vector<float> want = reference.predict(xr.data(), n), got = mixed.predict(xr.data(), n);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(first_unrounded(got, got.size(), r), -1) << "an output that is not a value of the type";
      double scale = 0;
      for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * scale) << "output " << i;
      const EvalResult a = reference.train_on_batch(xr.data(), y.data(), n), b = mixed.train_on_batch(xr.data(), y.data(), n);
      ASSERT_TRUE(std::isfinite(b.loss));
      EXPECT_NEAR(b.loss, a.loss, tol * std::max(1.0, a.loss));
      const std::vector<float> wa = reference.get_weights(), wb = mixed.get_weights();
      double change = 0;
      for (size_t i = 0; i < wa.size(); ++i) change = std::max(change, std::fabs(static_cast<double>(wa[i]) - w[i]));
      for (size_t i = 0; i < wa.size(); ++i) EXPECT_NEAR(wb[i], wa[i], tol * change + 1e-7) << "weight " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, MixedLayerTest,
                         ::testing::Values(Policy{Rounding::BFloat16, "bf16"}, Policy{Rounding::Float16, "f16"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kx
