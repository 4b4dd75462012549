// Keras's masks (Embedding's mask_zero) through the layers between an Embedding and what reads the
// mask, as Keras 3 carries them: Dense, LayerNormalization, Dropout and the activations pass the mask
// on, MultiHeadAttention's output carries the query's, Add ORs its inputs' masks,
// GlobalAveragePooling1D averages the steps kept, and layers whose Keras masking kx lacks refuse it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"
#include "kx/model.hpp"
#include "layer_check.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using test::Vec;

// Keras 3's Add sums the values as they are, masked or not; its output's mask is the OR of the inputs'
// masks when every input has one (the same mask on each: that mask), and none otherwise.
TEST(KerasMasks, AddOrsTheMasksOfItsInputs) {
  const int64_t steps = 5, features = 3, rows = 2;
  const std::vector<float> a{1, 0, 1, 1, 0, 0, 1, 1, 0, 1}, b{1, 1, 0, 0, 0, 1, 0, 1, 1, 0},
      c{0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  struct Case {
    const char* name;
    std::vector<std::vector<float>> masks;
    bool computes, passes;
  };
  const Case cases[] = {{"first masked", {a, {}}, false, false},
                        {"second masked", {{}, b}, false, false},
                        {"the same mask", {a, a}, false, true},
                        {"two masks", {a, b}, true, false},
                        {"three masks", {a, b, c}, true, false},
                        {"two of three", {a, {}, c}, false, false}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    auto layer = core::make_layer(test::spec_of(LayerKind::Add, "add"));
    const std::vector<Shape> in(k.masks.size(), Shape{steps, features});
    const test::Checked r = test::check_layer(
        *layer, in, rows, {},
        [&](const std::vector<Vec>& x, const Vec&) {
          Vec y(x[0].size(), 0.0);
          for (const Vec& v : x)
            for (size_t n = 0; n < y.size(); ++n) y[n] += v[n];
          return y;
        },
        1e-4, false, {}, {}, k.masks);
    EXPECT_EQ(layer->computes_mask(), k.computes);
    EXPECT_EQ(layer->passes_mask(), k.passes);
    if (k.computes) {
      for (size_t n = 0; n < a.size(); ++n) {
        bool any = false;
        for (const std::vector<float>& m : k.masks) any = any || m[n] != 0;
        EXPECT_EQ(r.scratch[n], any ? 1.0f : 0.0f) << n;
      }
    }
  }
}

TEST(KerasMasks, GlobalAveragePooling1DAveragesTheKeptSteps) {
  const int64_t steps = 4, features = 3, rows = 3;
  // Holes, padding, and a sample masked throughout (0s: Keras's 0 / 0 would be NaN).
  const std::vector<float> mask{1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
  auto layer = core::make_layer(test::spec_of(LayerKind::GlobalAveragePooling1D, "pool"));
  test::check_layer(
      *layer, {{steps, features}}, rows, {},
      [&](const std::vector<Vec>& x, const Vec&) {
        Vec y(static_cast<size_t>(rows * features), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          double kept = 0;
          for (int64_t t = 0; t < steps; ++t) kept += mask[static_cast<size_t>(r * steps + t)];
          for (int64_t f = 0; f < features; ++f)
            for (int64_t t = 0; t < steps && kept > 0; ++t)
              if (mask[static_cast<size_t>(r * steps + t)] != 0)
                y[static_cast<size_t>(r * features + f)] += x[0][static_cast<size_t>((r * steps + t) * features + f)] / kept;
        }
        return y;
      },
      1e-4, false, mask);
  EXPECT_FALSE(layer->passes_mask());
}

// Embedding(mask_zero) -> Dense -> MultiHeadAttention(x, x) -> Add([dense, attention]) ->
// LayerNormalization -> Dropout -> GlobalAveragePooling1D -> Dense: nothing but the mask knows the
// order of the steps, so a sample's kept tokens in another order and with padding elsewhere predict
// and train as the same tokens unpadded, when the mask reaches every layer that reads it.
Model transformer_block(bool mask_zero, int64_t steps = 6, const std::vector<std::string>& replicas = {"cpu"}) {
  Model m = Model::functional(Strategy::mirrored(replicas), {steps}, "tokens");
  m.add_layer(std::string(R"({"class_name": "Embedding", "config": {"name": "emb", "input_dim": 20, "output_dim": 8,
              "mask_zero": )") + (mask_zero ? "true" : "false") + "}}", {"tokens"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "proj", "units": 8}})", {"emb"});
  m.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"name": "mha", "num_heads": 2, "key_dim": 4}})",
              {"proj", "proj"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "residual"}})", {"proj", "mha"});
  m.add_layer(R"({"class_name": "LayerNormalization", "config": {"name": "norm"}})", {"residual"});
  m.add_layer(R"({"class_name": "Dropout", "config": {"name": "drop", "rate": 0.0}})", {"norm"});
  m.add_layer(R"({"class_name": "GlobalAveragePooling1D", "config": {"name": "pool"}})", {"drop"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}})", {"pool"});
  CompileOptions o;
  o.seed = 5;
  m.compile(o);
  return m;
}

TEST(KerasMasks, ReachEveryLayerOfATransformerBlock) {
  // The same kept tokens, reordered, with padding at the end, at the start and in holes.
  const std::vector<float> ids{3, 7, 11, 0, 0, 0, 0, 0, 11, 3, 7, 0, 7, 0, 3, 0, 11, 0};
  const std::vector<float> unpadded{3, 7, 11}, label{1};
  Model short_model = transformer_block(false, 3);
  const std::vector<float> want = short_model.predict(unpadded.data(), 1);
  short_model.train_on_batch(unpadded.data(), label.data(), 1);
  const std::vector<float> trained = short_model.get_weights();
  for (const bool mask_zero : {true, false}) {
    SCOPED_TRACE(mask_zero ? "mask_zero" : "no mask");
    for (int r = 0; r < 3; ++r) {
      Model m = transformer_block(mask_zero);
      m.set_weights(transformer_block(false, 3).get_weights());  // the short model's first weights
      const std::vector<float> y = m.predict(ids.data() + r * 6, 1);
      if (!mask_zero) {
        EXPECT_GT(test::relative_difference(y, want), 1e-4);  // the padding counts: the test can fail
        continue;
      }
      EXPECT_LE(test::relative_difference(y, want), 1e-6) << "sample " << r;
      m.train_on_batch(ids.data() + r * 6, label.data(), 1);
      EXPECT_LE(test::relative_difference(m.get_weights(), trained), 1e-5) << "sample " << r;
    }
  }
}

TEST(KerasMasks, TwoReplicasTrainAsOne) {
  const std::vector<float> ids{3, 7, 11, 0, 0, 0, 0, 0, 11, 3, 7, 0, 7, 0, 3, 0, 11, 0, 1, 2, 3, 4, 5, 6};
  const std::vector<float> labels{0, 1, 2, 1};
  std::vector<std::vector<float>> after;
  for (const std::vector<std::string>& replicas : {std::vector<std::string>{"cpu"}, {"cpu", "cpu"}}) {
    Model m = transformer_block(true, 6, replicas);
    for (int step = 0; step < 3; ++step) m.train_on_batch(ids.data(), labels.data(), 4);
    after.push_back(m.get_weights());
  }
  EXPECT_LE(test::relative_difference(after[0], after[1]), 1e-5);
}

// Keras leaves masked positions out of the loss and the metrics of a model whose output carries a mask
// (a sequence labeller); kx does not yet, so training or evaluating such a model is refused with a
// clear error, while predicting stays open. A model whose mask ends before the output trains.
TEST(KerasMasks, AMaskedOutputIsRefusedForTheLossNotForPredict) {
  const std::vector<float> ids{3, 7, 0, 0, 5, 0}, labels{1, 2, 0, 0, 1, 0};
  Model m = Model::functional(Strategy::default_strategy(), {3}, "tokens");
  m.add_layer(R"({"class_name": "Embedding", "config": {"name": "emb", "input_dim": 9, "output_dim": 4, "mask_zero": true}})",
              {"tokens"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "tags", "units": 3, "activation": "softmax"}})", {"emb"});
  m.compile(CompileOptions{});
  const std::vector<float> before = m.get_weights();
  EXPECT_EQ(m.predict(ids.data(), 2).size(), 2u * 3 * 3);
  for (const bool train : {true, false}) {
    try {
      if (train)
        m.train_on_batch(ids.data(), labels.data(), 2);
      else
        m.test_on_batch(ids.data(), labels.data(), 2);
      ADD_FAILURE() << (train ? "train_on_batch" : "test_on_batch") << " used a masked output";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("\"emb\""), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(m.get_weights(), before);  // nothing was lost
}

// Layers whose Keras counterparts use the mask in ways kx does not (batch statistics over the kept
// steps, merged masks of Concatenate and Multiply) refuse it; a layer that ends the mask (Flatten, as
// Keras's layers without masking) does not; neither does a layer added without a mask.
TEST(KerasMasks, LayersWithoutKerasMaskingInKxRefuseAMask) {
  const char* emb = R"({"class_name": "Embedding", "config": {"name": "emb", "input_dim": 20, "output_dim": 4, "mask_zero": true}})";
  for (const char* refused : {R"({"class_name": "BatchNormalization", "config": {}})"}) {
    Model m = Model::functional(Strategy::default_strategy(), {5}, "tokens");
    m.add_layer(emb, {"tokens"});
    EXPECT_THROW(m.add_layer(refused, {"emb"}), Error) << refused;
  }
  for (const char* merged : {R"({"class_name": "Concatenate", "config": {}})", R"({"class_name": "Multiply", "config": {}})"}) {
    Model m = Model::functional(Strategy::default_strategy(), {5}, "tokens");
    m.add_layer(emb, {"tokens"});
    try {
      m.add_layer(merged, {"emb", "emb"});
      ADD_FAILURE() << merged << " took a masked input";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("mask"), std::string::npos) << e.what();
    }
  }
  Model ended = Model::functional(Strategy::default_strategy(), {5}, "tokens");
  ended.add_layer(emb, {"tokens"});
  ended.add_layer(R"({"class_name": "Flatten", "config": {"name": "flat"}})", {"emb"});
  EXPECT_NO_THROW(ended.add_layer(R"({"class_name": "Reshape", "config": {"target_shape": [5, 4]}})", {"flat"}));
  EXPECT_NO_THROW(ended.add_layer(R"({"class_name": "BatchNormalization", "config": {}})"));
}

}  // namespace
}  // namespace kx
