// Conv2D and MaxPooling2D: forward against a float64 reference, backward against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <filesystem>
#include <string>

#include "backend/backend.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

struct ConvCase {
  int64_t h, w, c, filters, kh, kw, stride;
  Padding padding;
  Activation act;
  const char* name;
  bool use_bias = true;
  // A mixed policy's type: x, the weights and dy hold its values, y and dW are rounded to it.
  backend::Rounding rounding = backend::Rounding::None;
};

// Keras's Conv2D in float64: NHWC input, kernel [kh, kw, c, f].
Vec conv_reference(const ConvCase& k, int64_t rows, const Vec& x, const Vec& w, const Vec& b, int64_t oh, int64_t ow,
                   int64_t pad_top, int64_t pad_left) {
  Vec y(static_cast<size_t>(rows * oh * ow * k.filters));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t f = 0; f < k.filters; ++f) {
          double s = b[static_cast<size_t>(f)];
          for (int64_t a = 0; a < k.kh; ++a)
            for (int64_t bb = 0; bb < k.kw; ++bb) {
              const int64_t yy = i * k.stride + a - pad_top, xx = j * k.stride + bb - pad_left;
              if (yy < 0 || yy >= k.h || xx < 0 || xx >= k.w) continue;
              for (int64_t ch = 0; ch < k.c; ++ch)
                s += x[static_cast<size_t>(((r * k.h + yy) * k.w + xx) * k.c + ch)] *
                     w[static_cast<size_t>(((a * k.kw + bb) * k.c + ch) * k.filters + f)];
            }
          double& out = y[static_cast<size_t>(((r * oh + i) * ow + j) * k.filters + f)];
          switch (k.act) {
            case Activation::Relu: out = std::max(s, 0.0); break;
            case Activation::Tanh: out = std::tanh(s); break;
            case Activation::Sigmoid: out = 1 / (1 + std::exp(-s)); break;
            default: out = s; break;
          }
        }
  return y;
}

class Conv2dLayerTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dLayerTest, ForwardMatchesFloat64AndBackwardMatchesFiniteDifferences) {
  const ConvCase k = GetParam();
  const int64_t rows = 2;
  auto be = backend::make_cpu_backend(2);
  LayerSpec spec;
  spec.kind = LayerKind::Conv2D;
  spec.name = "conv";
  spec.filters = k.filters;
  spec.kernel_h = k.kh;
  spec.kernel_w = k.kw;
  spec.stride = k.stride;
  spec.padding = k.padding;
  spec.activation = k.act;
  spec.use_bias = k.use_bias;
  auto layer = core::make_layer(spec);
  const Shape out = layer->build({k.h, k.w, k.c});
  int64_t oh, ow, pad_top = 0, pad_left = 0;
  if (k.padding == Padding::Same) {
    oh = (k.h + k.stride - 1) / k.stride;
    ow = (k.w + k.stride - 1) / k.stride;
    pad_top = std::max<int64_t>((oh - 1) * k.stride + k.kh - k.h, 0) / 2;
    pad_left = std::max<int64_t>((ow - 1) * k.stride + k.kw - k.w, 0) / 2;
  } else {
    oh = (k.h - k.kh) / k.stride + 1;
    ow = (k.w - k.kw) / k.stride + 1;
  }
  ASSERT_EQ(out, Shape({oh, ow, k.filters}));
  const int64_t nx = rows * k.h * k.w * k.c, nk = k.kh * k.kw * k.c * k.filters, ny = rows * oh * ow * k.filters;
  const int64_t nb = k.use_bias ? k.filters : 0;  // the bias follows the kernel, when there is one
  ASSERT_EQ(layer->params().size(), k.use_bias ? 2u : 1u);

  const auto typed = [&](std::vector<float> v) {
    for (float& e : v) e = backend::round_value(e, k.rounding);
    return test::to_buffer(v);
  };
  const bool mixed = k.rounding != backend::Rounding::None;
  // Half an ulp of the 16-bit type per rounding (the output's; the activation's gradient's too).
  const double ulp = k.rounding == backend::Rounding::BFloat16 ? 0x1p-8 : 0x1p-11;
  FloatBuffer x = typed(test::random_floats(nx, 11));
  FloatBuffer w = typed(test::random_floats(nk + nb, 12, -0.5f, 0.5f));
  FloatBuffer y(ny), dy(ny), dx(nx), dw(w.size());
  FloatBuffer workspace(std::max<int64_t>(layer->workspace_floats_on(*be, rows), 1));
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  c.w = w.data();
  c.workspace = workspace.data();
  c.training = true;
  c.rounding = k.rounding;
  layer->forward(c);
  // The plan hands a call's workspace to other buffers between calls: backward may not find forward's.
  std::fill(workspace.begin(), workspace.end(), std::numeric_limits<float>::quiet_NaN());
  const Vec xd = test::to_double(x.data(), x.size());
  const Vec wd = test::to_double(w.data(), nk);
  const Vec bd = k.use_bias ? test::to_double(w.data() + nk, k.filters) : Vec(static_cast<size_t>(k.filters), 0.0);
  auto f = [&](const Vec& xv, const Vec& wv, const Vec& bv) {
    return conv_reference(k, rows, xv, wv, bv, oh, ow, pad_top, pad_left);
  };
  const Vec want = f(xd, wd, bd);
  EXPECT_EQ(test::first_mismatch(y, want, want.size(), mixed ? 2 * ulp : 1e-5), -1);

  std::vector<float> r = test::random_floats(ny, 13);
  for (float& e : r) e = backend::round_value(e, k.rounding);
  std::copy(r.begin(), r.end(), dy.begin());
  const Vec rd(r.begin(), r.end());
  c.dy = dy.data();
  c.dx = dx.data();
  c.dw = dw.data();
  layer->backward(c);
  const Vec gx = test::numeric_gradient([&](const Vec& v) { return test::dot(rd, f(v, wd, bd)); }, xd);
  const Vec gw = test::numeric_gradient([&](const Vec& v) { return test::dot(rd, f(xd, v, bd)); }, wd);
  const double grad_tol = mixed ? (core::piecewise_linear(k.act) ? 2 : 8) * ulp : 1e-4;
  EXPECT_EQ(test::first_mismatch(dx, gx, gx.size(), grad_tol), -1) << "input gradient";
  EXPECT_EQ(test::first_mismatch(dw, gw, gw.size(), grad_tol), -1) << "kernel gradient";
  if (mixed) {
    for (float v : dw) ASSERT_EQ(backend::round_value(v, k.rounding), v) << "dW holds 16-bit values";
  }
  if (!k.use_bias) return;
  const Vec gb = test::numeric_gradient([&](const Vec& v) { return test::dot(rd, f(xd, wd, v)); }, bd);
  EXPECT_EQ(test::first_mismatch(dw.data() + nk, gb, gb.size(), grad_tol), -1) << "bias gradient";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2dLayerTest,
    ::testing::Values(ConvCase{6, 5, 3, 4, 3, 3, 1, Padding::Valid, Activation::None, "valid_3x3"},
                      ConvCase{7, 6, 2, 5, 3, 2, 2, Padding::Same, Activation::Relu, "same_stride2_relu"},
                      ConvCase{5, 5, 1, 3, 5, 5, 1, Padding::Same, Activation::Tanh, "same_5x5_tanh"},
                      ConvCase{8, 7, 3, 2, 1, 1, 2, Padding::Valid, Activation::Sigmoid, "pointwise_stride2"},
                      ConvCase{4, 5, 6, 3, 1, 1, 1, Padding::Valid, Activation::Relu, "pointwise_no_columns"},
                      // Taps that see no input column at all (input narrower than the padding).
                      ConvCase{3, 1, 2, 2, 5, 5, 2, Padding::Same, Activation::None, "same_5x5_narrow_input"}),
    [](const auto& info) { return std::string(info.param.name); });

// use_bias false: no bias tensor, y = act(conv(x, K)), through im2col and through the pointwise path.
INSTANTIATE_TEST_SUITE_P(
    WithoutBias, Conv2dLayerTest,
    ::testing::Values(ConvCase{6, 5, 3, 4, 3, 3, 1, Padding::Valid, Activation::None, "valid_3x3", false},
                      ConvCase{7, 6, 2, 5, 3, 2, 2, Padding::Same, Activation::Relu, "same_stride2_relu", false},
                      ConvCase{4, 5, 6, 3, 1, 1, 1, Padding::Valid, Activation::Tanh, "pointwise_no_columns", false}),
    [](const auto& info) { return std::string(info.param.name); });

// Mixed policies: the same layer reading 16-bit values and rounding what its GEMMs store, against
// float64 within the type's precision (the plan rounds dx, summed by col2im in float32, and an
// activation's output after it).
INSTANTIATE_TEST_SUITE_P(
    Mixed, Conv2dLayerTest,
    ::testing::Values(
        ConvCase{6, 5, 3, 4, 3, 3, 1, Padding::Valid, Activation::None, "valid_3x3_bf16", true, backend::Rounding::BFloat16},
        ConvCase{7, 6, 2, 5, 3, 2, 2, Padding::Same, Activation::Relu, "same_stride2_relu_bf16", true,
                 backend::Rounding::BFloat16},
        ConvCase{4, 5, 6, 3, 1, 1, 1, Padding::Valid, Activation::Relu, "pointwise_bf16", false, backend::Rounding::BFloat16},
        ConvCase{6, 5, 3, 4, 3, 3, 1, Padding::Valid, Activation::Relu, "valid_3x3_relu_f16", true,
                 backend::Rounding::Float16}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MaxPooling2dLayer, ForwardIsTheWindowMaxAndBackwardRoutesToIt) {
  const int64_t rows = 2, h = 7, w = 6, ch = 3;  // 7 rows: the last row of windows is dropped ("valid")
  auto be = backend::make_cpu_backend(2);
  LayerSpec spec;
  spec.kind = LayerKind::MaxPooling2D;
  spec.name = "pool";
  spec.pool_h = 2;
  spec.pool_w = 3;
  auto layer = core::make_layer(spec);
  ASSERT_EQ(layer->build({h, w, ch}), Shape({3, 2, ch}));
  FloatBuffer x = test::to_buffer(test::random_floats(rows * h * w * ch, 21));
  FloatBuffer y(rows * 3 * 2 * ch), dy(y.size()), dx(x.size());
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  layer->forward(c);
  auto reference = [&](const Vec& v) {
    Vec out(y.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t k = 0; k < ch; ++k) {
            double m = -INFINITY;
            for (int64_t a = 0; a < 2; ++a)
              for (int64_t b = 0; b < 3; ++b)
                m = std::max(m, v[static_cast<size_t>(((r * h + i * 2 + a) * w + j * 3 + b) * ch + k)]);
            out[static_cast<size_t>(((r * 3 + i) * 2 + j) * ch + k)] = m;
          }
    return out;
  };
  const Vec xd = test::to_double(x.data(), x.size());
  const Vec want = reference(xd);
  EXPECT_EQ(test::first_mismatch(y, want, want.size(), 0.0), -1);
  const std::vector<float> r = test::random_floats(y.size(), 22);
  std::copy(r.begin(), r.end(), dy.begin());
  const Vec rd(r.begin(), r.end());
  c.dy = dy.data();
  c.dx = dx.data();
  layer->backward(c);
  const Vec gx = test::numeric_gradient([&](const Vec& v) { return test::dot(rd, reference(v)); }, xd);
  EXPECT_EQ(test::first_mismatch(dx, gx, gx.size(), 1e-4), -1);
}

TEST(Conv2dLayer, RejectsBadShapesAndSettings) {
  LayerSpec spec;
  spec.kind = LayerKind::Conv2D;
  spec.name = "conv";
  spec.filters = 4;
  spec.kernel_h = spec.kernel_w = 3;
  EXPECT_EQ(test::status_of([&] { core::make_layer(spec)->build({10}); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { core::make_layer(spec)->build({2, 2, 1}); }), Status::InvalidArgument);
  spec.padding = Padding::Same;
  EXPECT_EQ(core::make_layer(spec)->build({2, 2, 1}), Shape({2, 2, 4}));
  for (auto bad : {&LayerSpec::filters, &LayerSpec::kernel_h, &LayerSpec::stride}) {
    LayerSpec b = spec;
    b.*bad = 0;
    EXPECT_EQ(test::status_of([&] { core::make_layer(b); }), Status::InvalidArgument);
  }
  LayerSpec pool;
  pool.kind = LayerKind::MaxPooling2D;
  pool.name = "pool";
  pool.pool_h = 3;
  EXPECT_EQ(test::status_of([&] { core::make_layer(pool)->build({2, 5, 1}); }), Status::InvalidArgument);
}

}  // namespace
}  // namespace kx

namespace kx {
namespace {

TEST(FashionMnist, CnnLearnsOnASubset) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  // A path built from a named one: GCC 12 warns (-Warray-bounds) about its own inlined move of a temporary.
  const std::filesystem::path images = std::filesystem::path(dir) / "train-images-idx3-ubyte.gz";
  if (!std::filesystem::exists(images)) GTEST_SKIP() << "dataset-fashion-mnist missing";
  Dataset train = Dataset::from_idx(images.string(), dir + "/train-labels-idx1-ubyte.gz").take(8000);
  train.shuffle(8000, 2);
  train.batch(64, false);
  Dataset test = Dataset::from_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz").take(2000);
  test.batch(500, false);
  Model m = Model::sequential(Strategy::default_strategy(), {28, 28, 1});
  m.add_conv2d(32, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_conv2d(64, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_flatten();
  m.add_dropout(0.5f);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  m.compile(co);
  EXPECT_EQ(m.num_params(), 34826);  // Keras's count for this model
  ASSERT_EQ(m.fit(train, FitOptions{}, nullptr, nullptr), Status::Ok);
  EXPECT_GT(m.evaluate(test).accuracy, 0.70);  // 125 steps; 2 epochs on all 60,000 images reach ~0.87
}

}  // namespace
}  // namespace kx
