// Embedding (keras.layers.Embedding): rows picked by integer ids, the table's gradient summed over
// repeated ids, the mask of mask_zero, a clear error for ids outside the table, Keras's config both
// ways, and the mask reaching an LSTM in a model fed int32 ids (padding then changes nothing).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"
#include "kx/model.hpp"
#include "reference.hpp"

namespace kx {
namespace {

std::unique_ptr<core::Layer> embedding(const std::string& config) {
  return core::make_layer(
      core::layer_spec_from_json(json::parse(R"({"class_name": "Embedding", "config": )" + config + "}")));
}

TEST(EmbeddingLayer, PicksRowsSumsGradientsAndMasksZero) {
  auto layer = embedding(R"({"name": "e", "input_dim": 6, "output_dim": 3, "mask_zero": true})");
  EXPECT_EQ(layer->build({4}), Shape({4, 3}));
  EXPECT_TRUE(layer->computes_mask());
  EXPECT_TRUE(layer->reads_integer_input());
  const int64_t rows = 2, n = 8, dim = 3, vocab = 6;
  const std::vector<float> ids = {1, 5, 0, 5, 2, 2, 5, 0};
  const std::vector<float> table = test::random_floats(vocab * dim, 3);
  std::vector<float> y(n * dim), scratch(static_cast<size_t>(layer->scratch_floats(rows)));
  auto be = backend::make_cpu_backend(2);
  core::LayerContext c;
  c.be = be.get();
  c.rows = rows;
  c.x = ids.data();
  c.w = table.data();
  c.y = y.data();
  c.scratch = scratch.data();
  layer->forward(c);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < dim; ++d)
      EXPECT_EQ(y[static_cast<size_t>(i * dim + d)], table[static_cast<size_t>(ids[static_cast<size_t>(i)] * dim + d)]);
    EXPECT_EQ(scratch[static_cast<size_t>(i)], ids[static_cast<size_t>(i)] != 0 ? 1.0f : 0.0f);
  }
  const std::vector<float> dy = test::random_floats(n * dim, 5);
  std::vector<float> dw(vocab * dim, 99.0f);
  c.dy = const_cast<float*>(dy.data());
  c.dw = dw.data();
  layer->backward(c);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t d = 0; d < dim; ++d) {
      double want = 0;
      for (int64_t i = 0; i < n; ++i)
        if (ids[static_cast<size_t>(i)] == static_cast<float>(v)) want += dy[static_cast<size_t>(i * dim + d)];
      EXPECT_NEAR(dw[static_cast<size_t>(v * dim + d)], want, 1e-6) << v << ", " << d;
    }
}

TEST(EmbeddingLayer, RefusesIdsOutsideTheTable) {
  auto layer = embedding(R"({"input_dim": 4, "output_dim": 2})");
  layer->build({3});
  const std::vector<float> table(8, 1.0f);
  std::vector<float> y(6, -1.0f);
  auto be = backend::make_cpu_backend(1);
  core::LayerContext c;
  c.be = be.get();
  c.rows = 2;
  c.w = table.data();
  c.y = y.data();
  for (const std::vector<float>& ids : {std::vector<float>{0, 1, 4, 0, 1, 2}, std::vector<float>{0, -1, 2, 0, 1, 2},
                                        std::vector<float>{0, 1.5f, 2, 0, 1, 2}}) {
    c.x = ids.data();
    try {
      layer->forward(c);
      ADD_FAILURE() << "an id outside [0, 4) was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("[0, 4)"), std::string::npos) << e.what();
    }
    for (float v : y) EXPECT_EQ(v, -1.0f);  // nothing written
  }
}

TEST(EmbeddingLayer, ReadsAndWritesKerasConfig) {
  auto layer = embedding(R"({"name": "emb", "input_dim": 10, "output_dim": 3, "mask_zero": true,
      "embeddings_initializer": {"class_name": "RandomUniform", "config": {"minval": -0.05, "maxval": 0.05}}})");
  layer->build({5});
  const json::Value out = layer->to_json();
  const json::Value& config = out.at("config", "");
  EXPECT_EQ(config.at("input_dim", "").as_number(""), 10);
  EXPECT_EQ(config.at("output_dim", "").as_number(""), 3);
  EXPECT_TRUE(config.at("mask_zero", "").as_bool(""));
  auto again = core::make_layer(core::layer_spec_from_json(out));
  EXPECT_EQ(again->build({5}), Shape({5, 3}));
  EXPECT_EQ(again->to_json().dump(), out.dump());
  for (const char* bad : {R"({"output_dim": 3})", R"({"input_dim": 0, "output_dim": 3})",
                          R"({"input_dim": 2.5, "output_dim": 3})"})
    EXPECT_THROW(embedding(bad), Error) << bad;
  EXPECT_THROW(embedding(R"({"input_dim": 100000000, "output_dim": 3})"), Error);
}

// With mask_zero, an LSTM skips padding: ids padded at the end or the start give the same last output,
// as in Keras (masked steps carry the state over); without the mask they differ.
TEST(EmbeddingLayer, MaskReachesTheLstmThroughAModelFedInt32Ids) {
  for (const bool mask_zero : {true, false}) {
    Model m = Model::sequential(Strategy::mirrored({"cpu"}), {5});
    m.add_layer(std::string(R"({"class_name": "Embedding", "config": {"input_dim": 9, "output_dim": 4, "mask_zero": )") +
                (mask_zero ? "true" : "false") + "}}");
    m.add_layer(R"({"class_name": "LSTM", "config": {"units": 3}})");
    CompileOptions o;
    o.seed = 3;
    m.compile(o);
    const std::vector<int32_t> ids = {3, 7, 2, 0, 0, 0, 0, 3, 7, 2};
    const std::vector<float> labels = {0, 1};
    Dataset d = Dataset::from_arrays(ids.data(), DType::I32, {2, 5}, labels.data(), DType::F32, {2, 1});
    std::vector<float> x(ids.begin(), ids.end());
    const std::vector<float> y = m.predict(x.data(), 2);
    ASSERT_EQ(y.size(), 6u);
    double diff = 0;
    for (size_t j = 0; j < 3; ++j) diff += std::abs(y[j] - y[3 + j]);
    if (mask_zero) {
      EXPECT_LE(diff, 1e-6);
    } else {
      EXPECT_GT(diff, 1e-4);
    }
    EXPECT_EQ(d.num_samples(), 2);
  }
}

}  // namespace
}  // namespace kx
