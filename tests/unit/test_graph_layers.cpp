// The layers added for convolutional and non-sequential models (pooling, padding, batch
// normalisation, Normalization, Add, Concatenate, Activation): forward against a float64 reference, backward
// against finite differences of that reference, one layer at a time on the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "backend/backend.hpp"
#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::check_layer;
using test::Checked;
using test::Reference;
using test::spec_of;
using test::Vec;

size_t at(int64_t r, int64_t i, int64_t j, int64_t c, int64_t h, int64_t w, int64_t ch) {
  return static_cast<size_t>(((r * h + i) * w + j) * ch + c);
}

TEST(PoolingLayers, AveragePoolingWithStridesMatchesTheReference) {
  LayerSpec s = spec_of(LayerKind::AveragePooling2D, "avg");
  s.pool_h = 2;
  s.pool_w = 3;
  s.pool_stride_h = 1;  // overlapping windows along the height
  s.pool_stride_w = 2;
  auto layer = core::make_layer(s);
  const int64_t rows = 2, H = 5, W = 7, C = 3, OH = 4, OW = 3;
  check_layer(*layer, {{H, W, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(static_cast<size_t>(rows * OH * OW * C));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j)
          for (int64_t c = 0; c < C; ++c) {
            double sum = 0;
            for (int64_t a = 0; a < 2; ++a)
              for (int64_t b = 0; b < 3; ++b) sum += x[0][at(r, i + a, 2 * j + b, c, H, W, C)];
            y[at(r, i, j, c, OH, OW, C)] = sum / 6;
          }
    return y;
  });
}

TEST(PoolingLayers, OverlappingMaxPoolingMatchesTheReference) {
  LayerSpec s = spec_of(LayerKind::MaxPooling2D, "max");
  s.pool_h = s.pool_w = 3;
  s.pool_stride_h = s.pool_stride_w = 2;  // ResNet's stem pooling
  auto layer = core::make_layer(s);
  const int64_t rows = 2, H = 7, W = 6, C = 2, OH = 3, OW = 2;
  check_layer(*layer, {{H, W, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(static_cast<size_t>(rows * OH * OW * C));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j)
          for (int64_t c = 0; c < C; ++c) {
            double m = -1e300;
            for (int64_t a = 0; a < 3; ++a)
              for (int64_t b = 0; b < 3; ++b) m = std::max(m, x[0][at(r, 2 * i + a, 2 * j + b, c, H, W, C)]);
            y[at(r, i, j, c, OH, OW, C)] = m;
          }
    return y;
  });
}

TEST(PoolingLayers, GlobalAveragePoolingIsTheMeanOfEachChannel) {
  auto layer = core::make_layer(spec_of(LayerKind::GlobalAveragePooling2D, "gap"));
  const int64_t rows = 3, H = 4, W = 5, C = 6;
  EXPECT_EQ(layer->build({H, W, C}), Shape({C}));
  check_layer(*layer, {{H, W, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(static_cast<size_t>(rows * C), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < H * W; ++p)
        for (int64_t c = 0; c < C; ++c) y[static_cast<size_t>(r * C + c)] += x[0][static_cast<size_t>((r * H * W + p) * C + c)] / (H * W);
    return y;
  });
}

// keepdims (Keras's squeeze-and-excite blocks): the same means, as (1, 1, channels), in JSON both ways.
TEST(PoolingLayers, GlobalAveragePoolingKeepsDimsAsKeras) {
  const std::string keras = R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "gap", "keepdims": true,
      "data_format": "channels_last"}})";
  auto layer = core::make_layer(core::layer_spec_from_json(json::parse(keras)));
  const int64_t rows = 2, H = 3, W = 2, C = 4;
  EXPECT_EQ(layer->build({H, W, C}), Shape({1, 1, C}));
  check_layer(*layer, {{H, W, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(static_cast<size_t>(rows * C), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < H * W; ++p)
        for (int64_t c = 0; c < C; ++c) y[static_cast<size_t>(r * C + c)] += x[0][static_cast<size_t>((r * H * W + p) * C + c)] / (H * W);
    return y;
  });
  const json::Value out = layer->to_json();
  EXPECT_TRUE(out.at("config", "").at("keepdims", "").as_bool(""));
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({H, W, C}), Shape({1, 1, C}));
  EXPECT_EQ(test::status_of([] {
              core::make_layer(core::layer_spec_from_json(json::parse(
                  R"({"class_name": "GlobalAveragePooling2D", "config": {"data_format": "channels_first"}})")));
            }),
            Status::Unsupported);
}

// Keras's default padding is (1, 1): a config without one pads a pixel on every side.
TEST(ZeroPadding2dLayer, DefaultsToOnePixelAsKeras) {
  auto layer = core::make_layer(
      core::layer_spec_from_json(json::parse(R"({"class_name": "ZeroPadding2D", "config": {"name": "pad"}})")));
  EXPECT_EQ(layer->build({3, 4, 2}), Shape({5, 6, 2}));
}

TEST(ZeroPadding2dLayer, PadsWithZerosAndCropsTheGradient) {
  LayerSpec s = spec_of(LayerKind::ZeroPadding2D, "pad");
  s.pad_top = 1;
  s.pad_bottom = 2;
  s.pad_left = 0;
  s.pad_right = 3;
  auto layer = core::make_layer(s);
  const int64_t rows = 2, H = 3, W = 4, C = 2, OH = 6, OW = 7;
  EXPECT_EQ(layer->build({H, W, C}), Shape({OH, OW, C}));
  check_layer(*layer, {{H, W, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(static_cast<size_t>(rows * OH * OW * C), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t c = 0; c < C; ++c) y[at(r, i + 1, j, c, OH, OW, C)] = x[0][at(r, i, j, c, H, W, C)];
    return y;
  });
}

using test::batch_norm_reference;
using test::normalization_reference;

TEST(BatchNormalizationLayer, TrainingNormalisesWithTheBatchAndMovesTheStatistics) {
  LayerSpec s = spec_of(LayerKind::BatchNormalization, "bn");
  s.momentum = 0.9f;
  s.epsilon = 1e-3f;
  auto layer = core::make_layer(s);
  const int64_t rows = 3, H = 2, W = 3, C = 4, n = rows * H * W;
  ASSERT_EQ(layer->params().size(), 4u);
  // gamma, beta, moving mean, moving variance
  std::vector<float> w = test::random_floats(C, 5, 0.5f, 1.5f);
  for (float v : test::random_floats(C, 6)) w.push_back(v);
  for (float v : test::random_floats(C, 7)) w.push_back(v);
  for (float v : test::random_floats(C, 8, 0.5f, 2.0f)) w.push_back(v);
  // The moving statistics do not enter the training output: only gamma and beta are differentiated.
  const Checked r = check_layer(
      *layer, {{H, W, C}}, rows, w,
      [&](const std::vector<Vec>& x, const Vec& wv) { return batch_norm_reference(x[0], wv, n, C, s.epsilon); }, 1e-4,
      false);
  const Vec x = test::to_double(test::random_floats(rows * H * W * C, 100).data(), static_cast<size_t>(rows * H * W * C));
  const Vec dy = test::to_double(test::random_floats(rows * H * W * C, 77).data(), x.size());
  const Vec wd(w.begin(), w.end());
  for (int64_t k = 0; k < 2 * C; ++k) {  // gamma and beta by finite differences
    const Vec g = test::numeric_gradient(
        [&](const Vec& v) {
          Vec full = wd;
          full[static_cast<size_t>(k)] = v[0];
          return test::dot(dy, batch_norm_reference(x, full, n, C, s.epsilon));
        },
        Vec{wd[static_cast<size_t>(k)]});
    EXPECT_NEAR(r.dw[k], g[0], 1e-4 * std::max(1.0, std::fabs(g[0]))) << "gamma/beta " << k;
  }
  // The moving statistics' step: (moving - batch) * (1 - momentum), the whole batch being this one.
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[static_cast<size_t>(i * C + c)] / n;
    for (int64_t i = 0; i < n; ++i) var += std::pow(x[static_cast<size_t>(i * C + c)] - mean, 2) / n;
    EXPECT_NEAR(r.dw[2 * C + c], (w[2 * C + c] - mean) * 0.1, 1e-6);
    EXPECT_NEAR(r.dw[3 * C + c], (w[3 * C + c] - var) * 0.1, 1e-6);
  }
}

// The batch's moments (one pass, shifted by each column's first value) against float64's two passes
// where a plain E[x^2] - E[x]^2 would cancel: columns far from zero with a small spread (one whose first
// value lies far from the others), a constant one (variance exactly 0), over enough rows for several
// chunks on two threads.
TEST(BatchNormalizationLayer, MomentsFarFromZeroMatchFloat64) {
  const int64_t rows = 5000, cols = 4;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  const std::vector<float> noise = test::random_floats(x.size(), 31);
  for (int64_t r = 0; r < rows; ++r) {
    const auto u = [&](int64_t c) { return noise[static_cast<size_t>(r * cols + c)]; };
    x[static_cast<size_t>(r * cols + 0)] = 1e5f + u(0);
    x[static_cast<size_t>(r * cols + 1)] = r == 0 ? 0.0f : 1e5f + 0.5f * u(1);
    x[static_cast<size_t>(r * cols + 2)] = 3.0f;
    x[static_cast<size_t>(r * cols + 3)] = -50.0f + 0.5f * u(3);
  }
  const auto be = backend::make_cpu_backend(2);
  std::vector<float> mean(cols), var(cols);
  be->column_moments(rows, cols, x.data(), mean.data(), var.data());
  for (int64_t c = 0; c < cols; ++c) {
    double m = 0, v = 0;
    for (int64_t r = 0; r < rows; ++r) m += x[static_cast<size_t>(r * cols + c)];
    m /= rows;
    for (int64_t r = 0; r < rows; ++r) v += std::pow(x[static_cast<size_t>(r * cols + c)] - m, 2);
    v /= rows;
    EXPECT_NEAR(mean[static_cast<size_t>(c)], m, 1e-7 * std::fabs(m)) << "column " << c;
    EXPECT_NEAR(var[static_cast<size_t>(c)], v, 1e-6 * v) << "column " << c;
  }
  EXPECT_EQ(var[2], 0.0f);
}

TEST(BatchNormalizationLayer, InferenceAndFrozenUseTheMovingStatistics) {
  for (bool frozen : {false, true}) {
    LayerSpec s = spec_of(LayerKind::BatchNormalization, "bn");
    s.trainable = !frozen;
    auto layer = core::make_layer(s);
    const int64_t rows = 4, C = 3;
    layer->build({C});
    std::vector<float> w = test::random_floats(C, 5, 0.5f, 1.5f);
    for (float v : test::random_floats(C, 6)) w.push_back(v);
    for (float v : test::random_floats(C, 7)) w.push_back(v);
    for (float v : test::random_floats(C, 8, 0.5f, 2.0f)) w.push_back(v);
    auto be = backend::make_cpu_backend(1);
    FloatBuffer x = test::to_buffer(test::random_floats(rows * C, 9)), y(rows * C), dy = test::to_buffer(test::random_floats(rows * C, 10)),
                dx(rows * C), scratch(layer->scratch_floats(rows)), wb = test::to_buffer(w);
    core::LayerContext c;
    c.be = be.get();
    c.rows = rows;
    c.x = x.data();
    c.y = y.data();
    c.w = wb.data();
    c.scratch = scratch.data();
    c.training = frozen;  // a frozen layer normalises with its moving statistics even in training
    layer->forward(c);
    c.dy = dy.data();
    c.dx = dx.data();
    layer->backward(c);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < C; ++k) {
        const double scale = w[k] / std::sqrt(static_cast<double>(w[3 * C + k]) + s.epsilon);
        EXPECT_NEAR(y[r * C + k], (x[r * C + k] - w[2 * C + k]) * scale + w[C + k], 1e-5);
        EXPECT_NEAR(dx[r * C + k], dy[r * C + k] * scale, 1e-5);
      }
  }
}

TEST(NormalizationLayer, SubtractsTheMeanAndDividesByTheStandardDeviationPerChannel) {
  const int64_t rows = 3, H = 2, W = 3, C = 4;
  LayerSpec s = spec_of(LayerKind::Normalization, "norm");
  s.mean = test::random_floats(C, 5);
  s.variance = test::random_floats(C, 6, 0.2f, 3.0f);
  auto layer = core::make_layer(s);
  layer->build({H, W, C});
  const auto params = layer->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_FALSE(params[0].trainable);
  EXPECT_FALSE(params[1].trainable);
  std::vector<float> w = s.mean;
  w.insert(w.end(), s.variance.begin(), s.variance.end());
  EXPECT_EQ(params[0].values, s.mean);
  EXPECT_EQ(params[1].values, s.variance);
  const Checked r = check_layer(
      *layer, {{H, W, C}}, rows, w,
      [&](const std::vector<Vec>& x, const Vec&) { return normalization_reference(x[0], s.mean, s.variance, C); },
      1e-4, false);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(r.dw[i], 0.0f) << "the statistics are not trained";
}

TEST(NormalizationLayer, OneValueStandsForEveryChannelAndZeroVarianceDividesBy1e7) {
  const int64_t rows = 2, C = 3;
  LayerSpec s = spec_of(LayerKind::Normalization, "norm");
  s.mean = {0.25f};
  s.variance = {0.0f};
  auto layer = core::make_layer(s);
  layer->build({C});
  ASSERT_EQ(layer->params()[0].values, std::vector<float>(C, 0.25f));
  const std::vector<float> mean(C, 0.25f), var(C, 0.0f);
  std::vector<float> w = mean;
  w.insert(w.end(), var.begin(), var.end());
  check_layer(*layer, {{C}}, rows, w,
              [&](const std::vector<Vec>& x, const Vec&) { return normalization_reference(x[0], mean, var, C); }, 1e-4,
              false);
}

TEST(NormalizationLayer, RejectsStatisticsThatDoNotFit) {
  auto make = [](std::vector<float> mean, std::vector<float> var, Shape in) {
    return test::status_of([&] {
      LayerSpec s = spec_of(LayerKind::Normalization, "norm");
      s.mean = std::move(mean);
      s.variance = std::move(var);
      core::make_layer(s)->build(in);
    });
  };
  EXPECT_EQ(make({0.5f, 0.5f}, {1.0f, 1.0f}, {4, 4, 2}), Status::Ok);
  EXPECT_EQ(make({0.5f, 0.5f}, {1.0f, 1.0f}, {4, 4, 3}), Status::InvalidArgument);  // 2 values, 3 channels
  EXPECT_EQ(make({0.5f}, {1.0f, 1.0f}, {2}), Status::InvalidArgument);             // counts differ
  EXPECT_EQ(make({}, {}, {2}), Status::Ok);  // adapted: the weights hold them
  EXPECT_EQ(make({0.5f}, {-1.0f}, {2}), Status::InvalidArgument);
  EXPECT_EQ(make({NAN}, {1.0f}, {2}), Status::InvalidArgument);
  EXPECT_EQ(make({0.5f}, {INFINITY}, {2}), Status::InvalidArgument);
}

// An adapted Normalization as Keras writes it (EfficientNet's stem): axis [3], mean and variance null,
// the statistics in the weights: mean 0 and variance 1 until set, then those set.
TEST(NormalizationLayer, AdaptedStatisticsAreItsWeights) {
  const int64_t rows = 2, H = 2, W = 3, C = 3;
  const std::string keras = R"({"class_name": "Normalization", "config": {"name": "normalization", "trainable": true,
      "axis": [3], "invert": false, "mean": null, "variance": null}})";
  const LayerSpec s = core::layer_spec_from_json(json::parse(keras));
  auto layer = core::make_layer(s);
  layer->build({H, W, C});
  const auto params = layer->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].values, std::vector<float>(C, 0.0f));
  EXPECT_EQ(params[1].values, std::vector<float>(C, 1.0f));
  const std::vector<float> mean = test::random_floats(C, 7), var = test::random_floats(C, 8, 0.2f, 3.0f);
  std::vector<float> w = mean;
  w.insert(w.end(), var.begin(), var.end());
  check_layer(*layer, {{H, W, C}}, rows, w,
              [&](const std::vector<Vec>& x, const Vec&) { return normalization_reference(x[0], mean, var, C); }, 1e-4,
              false);
  // Its config keeps the statistics out (they are weights), and reads back as the same layer.
  const json::Value config = layer->to_json().at("config", "");
  EXPECT_TRUE(config.at("mean", "").is_null());
  EXPECT_TRUE(config.at("variance", "").is_null());
  auto again = core::make_layer(core::layer_spec_from_json(layer->to_json()));
  again->build({H, W, C});
  EXPECT_EQ(again->params()[1].values, std::vector<float>(C, 1.0f));
  EXPECT_EQ(again->to_json().dump(), layer->to_json().dump());
}

TEST(NormalizationLayer, RefusesAxesItCannotNormaliseOver) {
  const auto status = [](const std::string& config, Shape in) {
    return test::status_of([&] {
      core::make_layer(core::layer_spec_from_json(json::parse(R"({"class_name": "Normalization", "config": )" + config +
                                                              "}")))
          ->build(in);
    });
  };
  EXPECT_EQ(status(R"({"axis": [3], "mean": null, "variance": null})", {4, 4, 2}), Status::Ok);
  EXPECT_EQ(status(R"({"axis": -1, "mean": null, "variance": null})", {4, 4, 2}), Status::Ok);
  EXPECT_EQ(status(R"({"axis": [1, 2], "mean": null, "variance": null})", {4, 4, 2}), Status::Unsupported);
  EXPECT_EQ(status(R"({"axis": null, "mean": null, "variance": null})", {4, 4, 2}), Status::Unsupported);
  EXPECT_EQ(status(R"({"axis": [2], "mean": null, "variance": null})", {4, 4, 2}), Status::Unsupported);
  EXPECT_EQ(status(R"({"axis": -1, "mean": [1, 2], "variance": null})", {4, 4, 2}), Status::InvalidArgument);
}

TEST(MergeLayers, AddSumsItsInputs) {
  auto layer = core::make_layer(spec_of(LayerKind::Add, "add"));
  const int64_t rows = 2;
  check_layer(*layer, {{3, 4}, {3, 4}, {3, 4}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    Vec y(x[0].size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[1][i] + x[2][i];
    return y;
  });
}

TEST(MergeLayers, ConcatenateJoinsTheLastAxis) {
  auto layer = core::make_layer(spec_of(LayerKind::Concatenate, "cat"));
  const int64_t rows = 2, P = 3;
  EXPECT_EQ(layer->build_inputs({{P, 2}, {P, 5}}), Shape({P, 7}));
  auto fresh = core::make_layer(spec_of(LayerKind::Concatenate, "cat"));
  check_layer(*fresh, {{P, 2}, {P, 5}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    return test::concatenate_reference(x[0], x[1], rows * P, 2, 5);
  });
}

TEST(MergeLayers, RejectMismatchedShapes) {
  EXPECT_EQ(test::status_of([] { core::make_layer(spec_of(LayerKind::Add, "a"))->build_inputs({{3}, {4}}); }),
            Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::make_layer(spec_of(LayerKind::Add, "a"))->build_inputs({{3}}); }),
            Status::InvalidArgument);
  EXPECT_EQ(test::status_of([] { core::make_layer(spec_of(LayerKind::Concatenate, "c"))->build_inputs({{2, 3}, {3, 3}}); }),
            Status::InvalidArgument);
  LayerSpec axis0 = spec_of(LayerKind::Concatenate, "c");
  axis0.axis = 1;
  EXPECT_EQ(test::status_of([&] { core::make_layer(axis0)->build_inputs({{2, 3}, {2, 3}}); }), Status::Unsupported);
  EXPECT_EQ(test::status_of([] { core::make_layer(spec_of(LayerKind::Dense, "d"))->build_inputs({{2}, {2}}); }),
            Status::InvalidArgument);
}

class ActivationLayerTest : public ::testing::TestWithParam<Activation> {};

TEST_P(ActivationLayerTest, MatchesTheReference) {
  LayerSpec s = spec_of(LayerKind::Activation, "act");
  s.activation = GetParam();
  auto layer = core::make_layer(s);
  const int64_t rows = 3, P = 2, C = 4;
  // act(x) over the last axis is a Dense layer with the identity kernel and no bias.
  Vec eye(static_cast<size_t>(C * C), 0.0);
  for (int64_t k = 0; k < C; ++k) eye[static_cast<size_t>(k * C + k)] = 1;
  check_layer(*layer, {{P, C}}, rows, {}, [&](const std::vector<Vec>& x, const Vec&) {
    return test::dense_forward(x[0], eye, Vec(static_cast<size_t>(C), 0.0), rows * P, C, C, GetParam());
  });
}

INSTANTIATE_TEST_SUITE_P(Functions, ActivationLayerTest,
                         ::testing::Values(Activation::Relu, Activation::Sigmoid, Activation::Tanh, Activation::Softmax),
                         [](const auto& info) { return std::string(activation_name(info.param)); });

}  // namespace
}  // namespace kx
