// Mixed precision: rounding to bfloat16 / float16, the 16-bit GEMMs against float64, Dense in a mixed
// policy against float64, and every layer kind in a mixed model against the same model in float32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "backend/backend.hpp"
#include "backend/rounding_math.hpp"
#include "backend/cpu/gemm_bf16.hpp"
#include "core/layers/layer.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Rounding;
using backend::Trans;
using test::Vec;

float bf16(float x) { return backend::round_bfloat16(x); }
float f16(float x) { return backend::round_float16(x); }

TEST(Rounding, BFloat16RoundsToNearestTiesToEven) {
  EXPECT_EQ(bf16(1.0f), 1.0f);
  EXPECT_EQ(bf16(1.0f + 0x1p-8f), 1.0f);                      // halfway: to the even neighbour, down
  EXPECT_EQ(bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);        // halfway: to the even neighbour, up
  EXPECT_EQ(bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);  // above halfway
  EXPECT_EQ(bf16(-3.14159f), -3.140625f);
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(backend::round_bfloat16(backend::bits_float(0x7F800001u))));  // a NaN of low bits only
  EXPECT_EQ(bf16(-std::numeric_limits<float>::infinity()), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16(0x1p-130f), 0x1p-130f);  // subnormals keep their upper bits
}

TEST(Rounding, Float16RoundsToNearestTiesToEvenWithItsRange) {
  EXPECT_EQ(f16(1.0f + 0x1p-11f), 1.0f);
  EXPECT_EQ(f16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_EQ(f16(65504.0f), 65504.0f);
  EXPECT_EQ(f16(65519.0f), 65504.0f);
  EXPECT_EQ(f16(65520.0f), std::numeric_limits<float>::infinity());  // halfway to 2^16: beyond float16
  EXPECT_EQ(f16(-1e6f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16(0x1p-24f), 0x1p-24f);       // the smallest subnormal
  EXPECT_EQ(f16(0x1p-25f), 0.0f);           // halfway to it: to zero, the even one
  EXPECT_EQ(f16(3 * 0x1p-25f), 0x1p-23f);   // halfway between 2^-24 and 2^-23: to the even one
  EXPECT_EQ(f16(0x1p-14f + 0x1p-25f), 0x1p-14f);
  EXPECT_TRUE(std::isnan(f16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Rounding, TheBackendsKernelRoundsAsTheSharedFormula) {
  auto be = backend::make_cpu_backend(2);
  std::vector<float> x = test::random_floats(100003, 5, -70000.0f, 70000.0f);
  const std::vector<float> small = test::random_floats(x.size() / 2, 6, -1e-4f, 1e-4f);
  std::copy(small.begin(), small.end(), x.begin());
  x[7] = std::numeric_limits<float>::infinity();
  x[8] = std::numeric_limits<float>::quiet_NaN();
  x[9] = 65520.0f;
  x[10] = 3 * 0x1p-25f;
  for (Rounding r : {Rounding::BFloat16, Rounding::Float16}) {
    std::vector<float> y(x.size());
    be->round_to(r, static_cast<int64_t>(x.size()), x.data(), y.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = backend::round_value(x[i], r);
      ASSERT_TRUE(std::isnan(want) ? std::isnan(y[i]) : y[i] == want)
          << "element " << i << ": " << x[i] << " gives " << y[i] << ", want " << want;
    }
  }
}

// ------------------------------------------------------------------------------------------------

struct GemmCase {
  CpuBf16Gemm kernel;
  Rounding rounding;
  const char* name;
};

class MixedGemmTest : public ::testing::TestWithParam<GemmCase> {};

// C = op(A) op(B) + bias, ReLU, of 16-bit operands: the exact float64 sum, rounded to the type once,
// up to float32 accumulation; every stored value is a value of the type.
TEST_P(MixedGemmTest, MatchesFloat64OfTheRoundedOperands) {
  const GemmCase g = GetParam();
  if (g.kernel == CpuBf16Gemm::Dot && !backend::cpu::cpu_has_bf16_dot())
    GTEST_SKIP() << "this CPU lacks " << backend::cpu::bf16_dot_feature();
  auto be = backend::make_cpu_backend(2, CpuGemm::Auto, g.kernel);
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{13, 37, 29}, {64, 33, 517}, {3, 10, 256},
                                {300, 48, 64}, {8, 32, 1}, {9, 20, 20000}})
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes}) {
        const auto round_all = [&](std::vector<float> v) {
          for (float& x : v) x = backend::round_value(x, g.rounding);
          return v;
        };
        const std::vector<float> A = round_all(test::random_floats(M * K, 1)), B = round_all(test::random_floats(K * N, 2));
        const std::vector<float> bias = test::random_floats(N, 3);
        std::vector<float> C(M * N, 7.0f);
        backend::Epilogue ep{bias.data(), Activation::Relu};
        ep.rounding = g.rounding;
        const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
        be->gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N, ep);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = bias[j], mag = std::fabs(bias[j]);
            for (int64_t k = 0; k < K; ++k) {
              const double a = ta == Trans::No ? A[i * lda + k] : A[k * lda + i];
              const double b = tb == Trans::No ? B[k * ldb + j] : B[j * ldb + k];
              s += a * b;
              mag += std::fabs(a * b);
            }
            const double want = std::max(s, 0.0);
            const float got = C[i * N + j];
            const double unit = g.rounding == Rounding::BFloat16 ? 0x1p-8 : 0x1p-11;  // half an ulp, relative
            ASSERT_EQ(backend::round_value(got, g.rounding), got) << "not a 16-bit value";
            ASSERT_LE(std::fabs(got - want), unit * std::fabs(want) + 1e-6 * mag)
                << g.name << " ta=" << (ta == Trans::Yes) << " tb=" << (tb == Trans::Yes) << " " << M << "x" << N << "x"
                << K << " at " << i << "," << j;
          }
      }
}

INSTANTIATE_TEST_SUITE_P(Kernels, MixedGemmTest,
                         ::testing::Values(GemmCase{CpuBf16Gemm::Dot, Rounding::BFloat16, "bf16_dot"},
                                           GemmCase{CpuBf16Gemm::Fma, Rounding::BFloat16, "bf16_fma"},
                                           GemmCase{CpuBf16Gemm::Fma, Rounding::Float16, "f16_fma"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MixedGemm, DotProductsNeedTheCpusBf16Instructions) {
  if (backend::cpu::cpu_has_bf16_dot()) {
    EXPECT_NO_THROW(backend::make_cpu_backend(1, CpuGemm::Auto, CpuBf16Gemm::Dot));
  } else {
    EXPECT_EQ(test::status_of([] { backend::make_cpu_backend(1, CpuGemm::Auto, CpuBf16Gemm::Dot); }),
              Status::Unsupported);
  }
}

// The dot-product kernel (vdpbf16ps, BFDOT) against the float32 FMAs over the same bfloat16 operands,
// before C is rounded (keep_float32): the same exact products, so the two differ only by the order and
// the rounding of their float32 sums (BFDOT adds each pair first and rounds to odd). With beta, bias and
// ReLU; odd K, rows that fill no tile, columns that fill no vector; long K cut into passes and slices.
TEST(MixedGemm, DotKernelMatchesTheFmaPath) {
  if (!backend::cpu::cpu_has_bf16_dot()) GTEST_SKIP() << "this CPU lacks " << backend::cpu::bf16_dot_feature();
  auto dot = backend::make_cpu_backend(2, CpuGemm::Builtin, CpuBf16Gemm::Dot);
  auto fma = backend::make_cpu_backend(2, CpuGemm::Builtin, CpuBf16Gemm::Fma);
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{13, 37, 29}, {1, 3, 1}, {8, 32, 2}, {64, 33, 517},
                                {17, 70, 2500}, {9, 20, 20000}})
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes}) {
        std::vector<float> A = test::random_floats(M * K, 11), B = test::random_floats(K * N, 12);
        for (float& x : A) x = bf16(x);
        for (float& x : B) x = bf16(x);
        const std::vector<float> bias = test::random_floats(N, 13), C0 = test::random_floats(M * N, 14);
        backend::Epilogue ep{bias.data(), Activation::Relu};
        ep.rounding = Rounding::BFloat16;
        ep.keep_float32 = true;
        const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
        std::vector<float> Cd = C0, Cf = C0;
        dot->gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.5f, Cd.data(), N, ep);
        fma->gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.5f, Cf.data(), N, ep);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double mag = std::fabs(bias[j]) + 0.5 * std::fabs(C0[i * N + j]);
            for (int64_t k = 0; k < K; ++k)
              mag += std::fabs(double(ta == Trans::No ? A[i * lda + k] : A[k * lda + i]) *
                               (tb == Trans::No ? B[k * ldb + j] : B[j * ldb + k]));
            // BFDOT rounds each of its K additions to odd (under an ulp, 2^-23 relative), the FMAs to
            // nearest (half that), the epilogue adds two more: bounds relative to the sum of magnitudes.
            ASSERT_LE(std::fabs(Cd[i * N + j] - Cf[i * N + j]), 4 * (K + 2) * 0x1p-24 * mag)
                << "ta=" << (ta == Trans::Yes) << " tb=" << (tb == Trans::Yes) << " " << M << "x" << N << "x" << K
                << " at " << i << "," << j;
          }
      }
}

// Which kernel computes bfloat16 products on AArch64: BFDOT (" + bf16 dot") where the CPU reports
// FEAT_BF16, chosen by Auto too; else the float32 FMAs of the NEON kernel, and Dot is refused.
TEST(MixedGemm, TheBf16KernelOnAarch64IsBfdotWhereTheCpuHasIt) {
#if defined(__aarch64__)
  const std::string fma = backend::make_cpu_backend(1, CpuGemm::Builtin, CpuBf16Gemm::Fma)->gemm_kernel_name();
  const std::string any = backend::make_cpu_backend(1, CpuGemm::Builtin, CpuBf16Gemm::Auto)->gemm_kernel_name();
  EXPECT_EQ(fma, "builtin neon + bf16 fma");
  if (backend::cpu::cpu_has_bf16_dot()) {
    EXPECT_EQ(any, "builtin neon + bf16 dot");
    EXPECT_EQ(backend::make_cpu_backend(1, CpuGemm::Builtin, CpuBf16Gemm::Dot)->gemm_kernel_name(),
              "builtin neon + bf16 dot");
  } else {
    EXPECT_EQ(any, "builtin neon + bf16 fma");
  }
#else
  GTEST_SKIP() << "not an AArch64 build";
#endif
}

// ------------------------------------------------------------------------------------------------

struct DenseMixedCase {
  Activation act;
  Rounding rounding;
  const char* name;
};

class DenseMixedTest : public ::testing::TestWithParam<DenseMixedCase> {};

// Dense in a mixed policy: of 16-bit x and W, y is the float64 result rounded to the type (its
// activation after that is the plan's to round); dx, dW and db are the float64 gradients of the
// rounded inputs, each rounded once, up to the rounding of the activation's gradient.
TEST_P(DenseMixedTest, ForwardAndBackwardMatchFloat64WithinTheTypesPrecision) {
  const auto [act, rounding, name] = GetParam();
  const double ulp = rounding == Rounding::BFloat16 ? 0x1p-7 : 0x1p-10;
  const int64_t rows = 6, in = 45, units = 19;
  auto be = backend::make_cpu_backend(2);
  LayerSpec spec;
  spec.kind = LayerKind::Dense;
  spec.name = "dense";
  spec.units = units;
  spec.activation = act;
  auto layer = core::make_layer(spec);
  ASSERT_EQ(layer->build({in}), Shape({units}));
  const auto rounded = [&](std::vector<float> v) {
    for (float& x : v) x = backend::round_value(x, rounding);
    return test::to_buffer(v);
  };
  FloatBuffer x = rounded(test::random_floats(rows * in, 1)), w = rounded(test::random_floats(in * units + units, 2, -0.5f, 0.5f));
  FloatBuffer y(rows * units), dy = rounded(test::random_floats(rows * units, 3)), dx(rows * in), dw(w.size());
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  c.w = w.data();
  c.training = true;
  c.rounding = rounding;
  layer->forward(c);
  const Vec xd = test::to_double(x.data(), x.size()), wd = test::to_double(w.data(), in * units),
            bd = test::to_double(w.data() + in * units, units);
  const Vec want = test::dense_forward(xd, wd, bd, rows, in, units, act);
  EXPECT_EQ(test::first_mismatch(y, want, want.size(), ulp), -1) << "forward";
  if (core::piecewise_linear(act)) {
    for (float v : y) ASSERT_EQ(backend::round_value(v, rounding), v) << "the GEMM stores 16-bit values";
  }

  const Vec rd(dy.begin(), dy.end());
  c.dy = dy.data();
  c.dx = dx.data();
  c.dw = dw.data();
  layer->backward(c);
  // The gradient in dy (the activation's) is rounded once before the GEMMs: a few ulps in all.
  const double tol = core::piecewise_linear(act) ? ulp : 4 * ulp;
  auto loss_x = [&](const Vec& v) { return test::dot(rd, test::dense_forward(v, wd, bd, rows, in, units, act)); };
  auto loss_w = [&](const Vec& v) { return test::dot(rd, test::dense_forward(xd, v, bd, rows, in, units, act)); };
  auto loss_b = [&](const Vec& v) { return test::dot(rd, test::dense_forward(xd, wd, v, rows, in, units, act)); };
  EXPECT_EQ(test::first_mismatch(dx, test::numeric_gradient(loss_x, xd), xd.size(), tol), -1) << "input gradient";
  EXPECT_EQ(test::first_mismatch(dw, test::numeric_gradient(loss_w, wd), wd.size(), tol), -1) << "kernel gradient";
  EXPECT_EQ(test::first_mismatch(dw.data() + in * units, test::numeric_gradient(loss_b, bd), bd.size(), tol), -1)
      << "bias gradient";
  for (float v : dx) ASSERT_EQ(backend::round_value(v, rounding), v) << "dx holds 16-bit values";
  for (float v : dw) ASSERT_EQ(backend::round_value(v, rounding), v) << "dW and db hold 16-bit values";
}

INSTANTIATE_TEST_SUITE_P(
    Activations, DenseMixedTest,
    ::testing::Values(DenseMixedCase{Activation::None, Rounding::BFloat16, "linear_bf16"},
                      DenseMixedCase{Activation::Relu, Rounding::BFloat16, "relu_bf16"},
                      DenseMixedCase{Activation::Sigmoid, Rounding::BFloat16, "sigmoid_bf16"},
                      DenseMixedCase{Activation::Tanh, Rounding::BFloat16, "tanh_bf16"},
                      DenseMixedCase{Activation::Softmax, Rounding::BFloat16, "softmax_bf16"},
                      DenseMixedCase{Activation::Relu, Rounding::Float16, "relu_f16"},
                      DenseMixedCase{Activation::Tanh, Rounding::Float16, "tanh_f16"}),
    [](const auto& info) { return std::string(info.param.name); });

// ------------------------------------------------------------------------------------------------

LayerSpec named(LayerKind kind, const char* name) {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  return s;
}

// Every layer kind in one functional model: Normalization, Conv2D (3x3 and 1x1), BatchNormalization,
// ZeroPadding2D, MaxPooling2D, AveragePooling2D, Activation, Add, Concatenate, Dropout,
// GlobalAveragePooling2D, Flatten, Dense.
Model every_layer_model(Precision p, CpuBf16Gemm kernel = CpuBf16Gemm::Auto, bool batch_norm = true) {
  Strategy s = Strategy::default_strategy();
  s.set_num_threads(2);
  s.set_cpu_bf16_gemm(kernel);
  Model m = Model::functional(s, {10, 10, 3}, "x");
  FeatureMoments moments{{0.1f, -0.2f, 0.3f}, {1.5f, 0.7f, 2.0f}};
  LayerSpec norm = named(LayerKind::Normalization, "norm");
  norm.mean = moments.mean;
  norm.variance = moments.variance;
  m.add(norm, {"x"});
  LayerSpec conv = named(LayerKind::Conv2D, "conv");
  conv.filters = 8;
  conv.kernel_h = conv.kernel_w = 3;
  conv.padding = Padding::Same;
  conv.activation = Activation::Relu;
  m.add(conv, {"norm"});
  if (batch_norm) m.add(named(LayerKind::BatchNormalization, "bn"), {"conv"});
  LayerSpec pad = named(LayerKind::ZeroPadding2D, "pad");
  pad.pad_top = pad.pad_bottom = pad.pad_left = pad.pad_right = 1;
  m.add(pad, {batch_norm ? "bn" : "conv"});
  LayerSpec pool = named(LayerKind::MaxPooling2D, "pool");
  pool.pool_h = pool.pool_w = 2;
  m.add(pool, {"pad"});  // 6x6x8
  LayerSpec tanh = named(LayerKind::Activation, "tanh");
  tanh.activation = Activation::Tanh;
  m.add(tanh, {"pool"});
  m.add(named(LayerKind::Add, "sum"), {"tanh", "pool"});
  LayerSpec avg = named(LayerKind::AveragePooling2D, "avg");
  avg.pool_h = avg.pool_w = 2;
  avg.pool_stride_h = avg.pool_stride_w = 1;
  m.add(avg, {"sum"});  // 5x5x8
  LayerSpec point = named(LayerKind::Conv2D, "point");
  point.filters = 4;
  point.kernel_h = point.kernel_w = 1;
  point.activation = Activation::Sigmoid;
  m.add(point, {"avg"});
  m.add(named(LayerKind::Concatenate, "cat"), {"avg", "point"});
  LayerSpec drop = named(LayerKind::Dropout, "drop");
  drop.rate = 0.25f;
  m.add(drop, {"cat"});
  m.add(named(LayerKind::GlobalAveragePooling2D, "gap"), {"drop"});
  m.add(named(LayerKind::Flatten, "flat"), {"gap"});
  LayerSpec out = named(LayerKind::Dense, "out");
  out.units = 5;
  out.activation = Activation::Softmax;
  m.add(out, {"flat"});
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = 1.0;
  co.seed = 3;
  co.precision = p;
  m.compile(co);
  return m;
}

// The mixed model computes what the float32 one computes (itself checked against float64 layer by
// layer) within the 16-bit type's precision: its outputs and one SGD step of rate 1 (the gradient),
// through every layer's forward and backward. That the policy was applied shows in the differences.
TEST(MixedModel, EveryLayerKindMatchesFloat32WithinTheTypesPrecision) {
  const int64_t n = 12;
  const std::vector<float> x = test::random_floats(n * 300, 21, 0.0f, 1.0f);
  std::vector<float> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(i % 5);
  for (const bool bn : {true, false}) {
    Model f32 = every_layer_model(Precision::Float32, CpuBf16Gemm::Auto, bn);
    const std::vector<float> w0 = f32.get_weights(), p32 = f32.predict(x.data(), n);
    f32.train_on_batch(x.data(), y.data(), n);
    const std::vector<float> w32 = f32.get_weights();
    for (const auto& [p, kernel, tol] : {std::tuple{Precision::MixedBfloat16, CpuBf16Gemm::Fma, 0x1p-5},
                                         std::tuple{Precision::MixedBfloat16, CpuBf16Gemm::Dot, 0x1p-5},
                                         std::tuple{Precision::MixedFloat16, CpuBf16Gemm::Auto, 0x1p-8}}) {
      if (kernel == CpuBf16Gemm::Dot && !backend::cpu::cpu_has_bf16_dot()) continue;
      SCOPED_TRACE(std::string(precision_name(p)) + (bn ? " with" : " without") + " batch normalisation");
      Model mixed = every_layer_model(p, kernel, bn);
      mixed.set_weights(w0);
      const std::vector<float> p16 = mixed.predict(x.data(), n);
      mixed.train_on_batch(x.data(), y.data(), n);
      const std::vector<float> w16 = mixed.get_weights();
      // Per weight tensor: how far the gradient (one SGD step of rate 1) is from float32's.
      double worst = 0;
      std::string where;
      std::vector<float> all32(w0.size()), all16(w0.size());
      for (size_t i = 0; i < w0.size(); ++i) {
        all32[i] = w0[i] - w32[i];
        all16[i] = w0[i] - w16[i];
      }
      const double overall = test::relative_difference(all16, all32);
      for (const WeightInfo& t : mixed.weights()) {
        const size_t first = static_cast<size_t>(t.offset), count = static_cast<size_t>(num_elements(t.shape));
        std::vector<float> g32(count), g16(count);
        for (size_t i = 0; i < count; ++i) {
          g32[i] = w0[first + i] - w32[first + i];
          g16[i] = w0[first + i] - w16[first + i];
        }
        if (const double d = test::relative_difference(g16, g32); d > worst) worst = d, where = t.name;
      }
      const double dp = test::relative_difference(p16, p32);
      std::printf("%s (%s)%s: predictions %.3g, gradients %.3g of the largest, %.3g of its tensor's (%s)\n",
                  precision_name(p), kernel == CpuBf16Gemm::Dot ? "dot" : "fma", bn ? " with batch norm" : "", dp,
                  overall, worst, where.c_str());
      EXPECT_LT(dp, tol) << "predictions";
      EXPECT_GT(dp, 0.0) << "the policy changed nothing";
      if (bn) {
        // Batch normalisation's backward subtracts means of 16-bit gradients, and the bias before it
        // sums what nearly cancels: relative to their own tensors such gradients are mostly rounding.
        // Measured against the model's largest gradient.
        EXPECT_LT(overall, 8 * tol) << "gradients";
      } else {
        EXPECT_LT(worst, 4 * tol) << "gradients of " << where;
      }
    }
  }
}

TEST(MixedModel, OptionsAreCheckedAndTheCompileConfigNamesThePolicy) {
  Model m = Model::sequential(Strategy::default_strategy(), {4});
  m.add_dense(2);
  CompileOptions co;
  co.precision = static_cast<Precision>(7);
  EXPECT_EQ(test::status_of([&] { m.compile(co); }), Status::InvalidArgument);
  co.precision = Precision::MixedFloat16;
  co.initial_loss_scale = 0.5;
  EXPECT_EQ(test::status_of([&] { m.compile(co); }), Status::InvalidArgument);
  co.initial_loss_scale = 1024;
  co.loss_scale_growth_steps = 0;
  EXPECT_EQ(test::status_of([&] { m.compile(co); }), Status::InvalidArgument);
  co.loss_scale_growth_steps = 10;
  m.compile(co);
  EXPECT_EQ(m.loss_scale(), 1024.0);
  EXPECT_STREQ(precision_name(Precision::MixedBfloat16), "mixed_bfloat16");
}

}  // namespace
}  // namespace kx
