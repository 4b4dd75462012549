// Every layer: forward against a float64 reference, backward against finite differences.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_registry.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

struct DenseCase {
  Activation act;
  const char* name;
  bool use_bias = true;
};

class DenseLayerTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseLayerTest, ForwardMatchesFloat64AndBackwardMatchesFiniteDifferences) {
  const Activation act = GetParam().act;
  const bool use_bias = GetParam().use_bias;
  const int64_t rows = 5, in = 37, units = 19;  // not multiples of the tile sizes
  auto be = backend::make_cpu_backend(2);
  LayerSpec spec;
  spec.kind = LayerKind::Dense;
  spec.name = "dense";
  spec.units = units;
  spec.activation = act;
  spec.use_bias = use_bias;
  auto layer = core::make_layer(spec);
  ASSERT_EQ(layer->build({in}), Shape({units}));
  ASSERT_EQ(layer->params().size(), use_bias ? 2u : 1u);

  FloatBuffer x = test::to_buffer(test::random_floats(rows * in, 1));
  const int64_t nb = use_bias ? units : 0;
  FloatBuffer w = test::to_buffer(test::random_floats(in * units + nb, 2, -0.5f, 0.5f));  // kernel then bias
  FloatBuffer y(rows * units), dy(rows * units), dx(rows * in), dw(w.size());
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  c.w = w.data();
  c.training = true;
  layer->forward(c);

  const Vec xd = test::to_double(x.data(), x.size());
  const Vec wd = test::to_double(w.data(), in * units);
  const Vec bd = use_bias ? test::to_double(w.data() + in * units, units) : Vec(static_cast<size_t>(units), 0.0);
  const Vec want = test::dense_forward(xd, wd, bd, rows, in, units, act);
  EXPECT_EQ(test::first_mismatch(y, want, want.size(), 1e-5), -1);

  // L = sum(R * y) for a random R, so dL/dy = R.
  const std::vector<float> r = test::random_floats(rows * units, 3);
  std::copy(r.begin(), r.end(), dy.begin());
  const Vec rd(r.begin(), r.end());
  c.dy = dy.data();
  c.dx = dx.data();
  c.dw = dw.data();
  layer->backward(c);

  auto loss_x = [&](const Vec& v) { return test::dot(rd, test::dense_forward(v, wd, bd, rows, in, units, act)); };
  auto loss_w = [&](const Vec& v) { return test::dot(rd, test::dense_forward(xd, v, bd, rows, in, units, act)); };
  auto loss_b = [&](const Vec& v) { return test::dot(rd, test::dense_forward(xd, wd, v, rows, in, units, act)); };
  const Vec gx = test::numeric_gradient(loss_x, xd);
  const Vec gw = test::numeric_gradient(loss_w, wd);
  EXPECT_EQ(test::first_mismatch(dx, gx, gx.size(), 1e-4), -1) << "input gradient";
  EXPECT_EQ(test::first_mismatch(dw, gw, gw.size(), 1e-4), -1) << "kernel gradient";
  if (!use_bias) return;
  const Vec gb = test::numeric_gradient(loss_b, bd);
  EXPECT_EQ(test::first_mismatch(dw.data() + in * units, gb, gb.size(), 1e-4), -1) << "bias gradient";
}

INSTANTIATE_TEST_SUITE_P(Activations, DenseLayerTest,
                         ::testing::Values(DenseCase{Activation::None, "linear"}, DenseCase{Activation::Relu, "relu"},
                                           DenseCase{Activation::Sigmoid, "sigmoid"},
                                           DenseCase{Activation::Tanh, "tanh"},
                                           DenseCase{Activation::Softmax, "softmax"}),
                         [](const auto& info) { return std::string(info.param.name); });

// use_bias false: no bias tensor, y = act(x W).
INSTANTIATE_TEST_SUITE_P(WithoutBias, DenseLayerTest,
                         ::testing::Values(DenseCase{Activation::None, "linear", false},
                                           DenseCase{Activation::Relu, "relu", false},
                                           DenseCase{Activation::Softmax, "softmax", false}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LayerRegistry, EveryKindHasItsRowFoundByItsClassName) {
  for (int k = 0; k < kLayerKindCount; ++k) {
    const auto kind = static_cast<LayerKind>(k);
    const core::LayerEntry& e = core::layer_entry(kind);
    EXPECT_EQ(e.kind, kind);
    const core::LayerEntry* found = core::find_layer_entry(e.class_name);
    ASSERT_NE(found, nullptr) << e.class_name;
    EXPECT_EQ(found->kind, kind) << e.class_name;
    EXPECT_NE(e.make, nullptr) << e.class_name;
    EXPECT_GT(std::string(e.name_stem).size(), 0u) << e.class_name;
  }
  EXPECT_EQ(core::find_layer_entry("InputLayer"), nullptr);
  EXPECT_EQ(test::status_of([] { core::layer_entry(static_cast<LayerKind>(kLayerKindCount)); }), Status::Internal);
}

TEST(DenseLayer, RejectsBadShapesAndUnits) {
  LayerSpec spec;
  spec.kind = LayerKind::Dense;
  spec.units = 0;
  EXPECT_THROW(core::make_layer(spec), Error);
  spec.units = 3;
  auto layer = core::make_layer(spec);
  EXPECT_THROW(layer->build({}), Error);  // no features axis
  EXPECT_EQ(layer->build({28, 28}), (Shape{28, 3}));  // each of 28 steps, as Keras
}

TEST(FlattenLayer, ReshapesWithoutCopy) {
  LayerSpec spec;
  spec.kind = LayerKind::Flatten;
  auto layer = core::make_layer(spec);
  EXPECT_EQ(layer->build({4, 5, 3}), Shape({60}));
  EXPECT_TRUE(layer->aliases_input());
  EXPECT_TRUE(layer->params().empty());
}

// A dropout layer's training context: x in, y and the mask (scratch) out, the step's seed in host memory
// (the CPU backend's).
core::LayerContext dropout_training(backend::Backend& be, int64_t rows, FloatBuffer& x, FloatBuffer& y,
                                    FloatBuffer& mask, uint64_t* step_seed) {
  core::LayerContext c;
  c.be = &be;
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  c.scratch = mask.data();
  c.training = true;
  c.step_seed = step_seed;
  return c;
}

class DropoutLayerTest : public ::testing::Test {
 protected:
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
  std::unique_ptr<core::Layer> make(float rate) {
    LayerSpec spec;
    spec.kind = LayerKind::Dropout;
    spec.rate = rate;
    auto l = core::make_layer(spec);
    l->build({n});
    return l;
  }
  static constexpr int64_t rows = 50, n = 400;
};

TEST_F(DropoutLayerTest, TrainingZeroesAboutRateAndScalesTheRest) {
  const float rate = 0.3f;
  auto layer = make(rate);
  FloatBuffer x = test::to_buffer(test::random_floats(rows * n, 4, 0.5f, 1.5f));
  FloatBuffer y(x.size()), mask(x.size());
  uint64_t step_seed = 77;
  core::LayerContext c = dropout_training(*be, rows, x, y, mask, &step_seed);
  layer->forward(c);
  int64_t zeros = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] == 0.0f) {
      ++zeros;
    } else {
      ASSERT_NEAR(y[i], x[i] / (1 - rate), 1e-6) << i;
    }
  }
  const double frac = static_cast<double>(zeros) / static_cast<double>(x.size());
  EXPECT_NEAR(frac, rate, 0.02);  // 20,000 draws: 5 standard deviations is about 0.016

  // Backward: dx = dy * mask, which is the exact gradient of sum(R * x * mask).
  FloatBuffer dy = test::to_buffer(test::random_floats(x.size(), 5)), dx(x.size());
  c.dy = dy.data();
  c.dx = dx.data();
  layer->backward(c);
  const Vec xd = test::to_double(x.data(), x.size());
  const Vec md = test::to_double(mask.data(), mask.size());
  const Vec rd = test::to_double(dy.data(), dy.size());
  auto loss = [&](const Vec& v) {
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += rd[i] * v[i] * md[i];
    return s;
  };
  const Vec g = test::numeric_gradient(loss, Vec(xd.begin(), xd.begin() + 500));  // a slice is plenty
  EXPECT_EQ(test::first_mismatch(dx, g, g.size(), 1e-5), -1);

  // Same seed, same mask; another seed, another mask.
  FloatBuffer y2(x.size()), mask2(x.size());
  c.y = y2.data();
  c.scratch = mask2.data();
  layer->forward(c);
  EXPECT_EQ(std::vector<float>(y.begin(), y.end()), std::vector<float>(y2.begin(), y2.end()));
  step_seed = 78;
  layer->forward(c);
  EXPECT_NE(std::vector<float>(y.begin(), y.end()), std::vector<float>(y2.begin(), y2.end()));
}

TEST_F(DropoutLayerTest, InferenceIsIdentity) {
  auto layer = make(0.5f);
  FloatBuffer x = test::to_buffer(test::random_floats(rows * n, 6)), y(x.size()), mask(x.size());
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = x.data();
  c.y = y.data();
  c.scratch = mask.data();
  c.training = false;
  layer->forward(c);
  EXPECT_EQ(std::vector<float>(x.begin(), x.end()), std::vector<float>(y.begin(), y.end()));
}

// EfficientNet's drop-connect: Dropout(rate, noise_shape=(None, 1, 1, 1)) keeps or drops each sample whole.
std::unique_ptr<core::Layer> dropout_from_keras(const std::string& noise_shape, const Shape& in, float rate = 0.3f) {
  auto l = core::make_layer(core::layer_spec_from_json(json::parse(
      R"({"class_name": "Dropout", "config": {"name": "drop", "rate": )" + std::to_string(rate) +
      R"(, "seed": null, "noise_shape": )" + noise_shape + "}}")));
  l->build(in);
  return l;
}

TEST(DropoutLayer, NoiseShapeDrawsOneMaskPerSampleBroadcastOverTheRest) {
  const float rate = 0.3f;
  const int64_t rows = 400, H = 3, W = 2, C = 4, n = H * W * C;
  auto layer = dropout_from_keras("[null, 1, 1, 1]", {H, W, C}, rate);
  ASSERT_EQ(layer->scratch_floats(rows), rows);  // one mask value per sample
  auto be = backend::make_cpu_backend(2);
  FloatBuffer x = test::to_buffer(test::random_floats(rows * n, 4, 0.5f, 1.5f));
  FloatBuffer y(x.size()), mask(static_cast<size_t>(rows));
  uint64_t step_seed = 11;
  core::LayerContext c = dropout_training(*be, rows, x, y, mask, &step_seed);
  layer->forward(c);
  int64_t dropped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool drop = y[static_cast<size_t>(r * n)] == 0.0f;
    dropped += drop;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(r * n + i);
      ASSERT_NEAR(y[k], drop ? 0.0 : x[k] / (1 - rate), 1e-6) << "sample " << r << " element " << i;
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / rows, rate, 0.12);  // 400 draws: 5 standard deviations ~0.115

  // Backward: dx = dy * the sample's mask, the exact gradient of sum(R * x * mask).
  FloatBuffer dy = test::to_buffer(test::random_floats(x.size(), 5)), dx(x.size());
  c.dy = dy.data();
  c.dx = dx.data();
  layer->backward(c);
  const Vec md = test::to_double(mask.data(), mask.size());
  const Vec rd = test::to_double(dy.data(), dy.size());
  const Vec xd = test::to_double(x.data(), x.size());
  auto loss = [&](const Vec& v) {
    double sum = 0;
    for (size_t i = 0; i < v.size(); ++i) sum += rd[i] * v[i] * md[i / static_cast<size_t>(n)];
    return sum;
  };
  const Vec g = test::numeric_gradient(loss, Vec(xd.begin(), xd.begin() + 10 * n));  // ten samples
  EXPECT_EQ(test::first_mismatch(dx, g, g.size(), 1e-5), -1);

  // A replica holding rows from 150 on draws the masks the whole batch has there.
  FloatBuffer y_part(static_cast<size_t>((rows - 150) * n)), mask_part(static_cast<size_t>(rows - 150));
  c.rows = rows - 150;
  c.first_row = 150;
  c.x = x.data() + 150 * n;
  c.y = y_part.data();
  c.scratch = mask_part.data();
  layer->forward(c);
  EXPECT_EQ(std::vector<float>(y_part.begin(), y_part.end()), std::vector<float>(y.begin() + 150 * n, y.end()));

  // Inference: the identity.
  c.training = false;
  layer->forward(c);
  EXPECT_EQ(std::vector<float>(y_part.begin(), y_part.end()), std::vector<float>(x.begin() + 150 * n, x.end()));
}

TEST(DropoutLayer, NoiseShapeOverSomeAxesSharesTheMaskAlongTheOthers) {
  const int64_t rows = 20, H = 3, W = 2, C = 5, n = H * W * C;
  auto layer = dropout_from_keras("[null, 1, null, 1]", {H, W, C}, 0.5f);  // a mask per sample and column
  ASSERT_EQ(layer->scratch_floats(rows), rows * W);
  auto be = backend::make_cpu_backend(1);
  FloatBuffer x = test::to_buffer(test::random_floats(rows * n, 9, 0.5f, 1.5f)), y(x.size()),
              mask(static_cast<size_t>(rows * W));
  uint64_t step_seed = 3;
  core::LayerContext c = dropout_training(*be, rows, x, y, mask, &step_seed);
  layer->forward(c);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t k = 0; k < C; ++k) {
          const size_t i = static_cast<size_t>(((r * H + h) * W + w) * C + k);
          ASSERT_EQ(y[i], x[i] * mask[static_cast<size_t>(r * W + w)]) << i;
        }
  // A noise_shape as large as the input is plain dropout, and written back as null.
  auto full = dropout_from_keras("[null, 3, null, 5]", {H, W, C});
  EXPECT_EQ(full->scratch_floats(rows), rows * n);
  EXPECT_TRUE(full->to_json().at("config", "").at("noise_shape", "").is_null());
  // JSON round trip.
  const json::Value out = layer->to_json();
  EXPECT_EQ(out.at("config", "").at("noise_shape", "").dump(), json::parse("[null, 1, 2, 1]").dump());
  auto again = core::make_layer(core::layer_spec_from_json(out));
  again->build({H, W, C});
  EXPECT_EQ(again->scratch_floats(rows), rows * W);
  EXPECT_EQ(again->to_json().dump(), out.dump());
}

TEST(DropoutLayer, RefusesNoiseShapesThatDoNotFit) {
  const auto status = [](const std::string& noise) {
    return test::status_of([&] { dropout_from_keras(noise, {4, 4, 2}); });
  };
  EXPECT_EQ(status("[null, 1, 1, 1]"), Status::Ok);
  EXPECT_EQ(status("[null, 4, 1, 2]"), Status::Ok);
  EXPECT_EQ(status("null"), Status::Ok);
  EXPECT_EQ(status("[1, 1, 1, 1]"), Status::Unsupported);  // one mask for the whole batch
  EXPECT_EQ(status("[8, 1, 1, 1]"), Status::Unsupported);
  EXPECT_EQ(status("[null, 1, 1]"), Status::InvalidArgument);    // another rank
  EXPECT_EQ(status("[null, 3, 1, 1]"), Status::InvalidArgument);  // 3 does not broadcast to 4
  EXPECT_EQ(status("[null, \"a\", 1, 1]"), Status::InvalidArgument);
}

TEST(DropoutLayer, RejectsRatesOutsideZeroToOne) {
  LayerSpec spec;
  spec.kind = LayerKind::Dropout;
  for (float r : {-0.1f, 1.0f, 1.5f, NAN}) {
    spec.rate = r;
    EXPECT_THROW(core::make_layer(spec), Error) << r;
  }
}

}  // namespace
}  // namespace kx
