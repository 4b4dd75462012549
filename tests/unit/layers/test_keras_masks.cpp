// Keras's masks (Embedding's mask_zero) through the layers between an Embedding and what reads the
// mask, as Keras 3 carries them: Dense, LayerNormalization, Dropout and the activations pass the mask
// on, MultiHeadAttention's output carries the query's, Add ORs its inputs' masks,
// GlobalAveragePooling1D averages the steps kept, and layers whose Keras masking kx lacks refuse it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// A sequence labeller whose output carries Embedding's mask: ids [steps] -> tags [steps, 3], softmax.
Model labeller(int64_t steps, bool recurrent, const std::vector<std::string>& replicas = {"cpu"},
               const OptimizerConfig& optimizer = {}, Precision precision = Precision::Float32) {
  Model m = Model::functional(Strategy::mirrored(replicas), {steps}, "tokens");
  m.add_layer(R"({"class_name": "Embedding", "config": {"name": "emb", "input_dim": 9, "output_dim": 4, "mask_zero": true}})",
              {"tokens"});
  std::string last = "emb";
  if (recurrent) {
    m.add_layer(R"({"class_name": "LSTM", "config": {"name": "lstm", "units": 5, "return_sequences": true}})", {"emb"});
    last = "lstm";
  }
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "tags", "units": 3, "activation": "softmax"}})", {last});
  CompileOptions o;
  o.seed = 11;
  o.accuracy = true;
  o.optimizer = optimizer;
  o.precision = precision;
  m.compile(o);
  return m;
}

// Keras 3's masked sparse cross-entropy and accuracy, in float64 from predicted probabilities
// [n, steps, 3]: each batch's loss is sum(loss * w * mask) / (its unmasked steps), 0 when there are
// none (divide_no_nan); the loss over batches is their mean weighed by their rows; the accuracy is
// sum(correct * w * mask) / sum(w * mask) over everything.
EvalResult keras_masked(const std::vector<float>& p, const std::vector<float>& ids, const std::vector<float>& labels,
                        const std::vector<float>& w, int64_t steps, int64_t batch) {
  const int64_t n = static_cast<int64_t>(ids.size()) / steps;
  double loss = 0, correct = 0, weight = 0;
  for (int64_t first = 0; first < n; first += batch) {
    double sum = 0, valid = 0;
    const int64_t rows = std::min(batch, n - first);
    for (int64_t i = first; i < first + rows; ++i)
      for (int64_t t = 0; t < steps; ++t) {
        const size_t at = static_cast<size_t>(i * steps + t);
        if (ids[at] == 0) continue;
        const float* q = p.data() + at * 3;
        const int64_t label = static_cast<int64_t>(labels[at]);
        sum += w[static_cast<size_t>(i)] * -std::log(static_cast<double>(q[label]));
        valid += 1;
        const bool right = std::max_element(q, q + 3) - q == label;
        correct += right ? w[static_cast<size_t>(i)] : 0.0;
        weight += w[static_cast<size_t>(i)];
      }
    loss += valid > 0 ? static_cast<double>(rows) * sum / valid : 0.0;
  }
  return {loss / static_cast<double>(n), weight > 0 ? correct / weight : 0.0};
}

// Padded sequences of 4 steps: holes, a sample fully masked (so the third batch of 2 is), uneven
// kept steps between the halves of a batch (two replicas count differently).
const std::vector<float> kIds{3, 7, 0, 0, 5, 0, 2, 0, 1, 2, 3, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 1, 0};
const std::vector<float> kTags{1, 2, 0, 0, 1, 0, 2, 0, 0, 1, 2, 1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 1, 2, 0, 1, 1};
const std::vector<float> kSampleWeights{1, 0.5f, 2, 1, 3, 1, 0.25f};

TEST(KerasMasks, AMaskedOutputsLossAndAccuracyAreKerasMaskedMeans) {
  Model m = labeller(4, true);
  const std::vector<float> p = m.predict(kIds.data(), 7);
  for (const bool weighted : {false, true}) {
    SCOPED_TRACE(weighted ? "sample weights" : "unweighted");
    const std::vector<float> w = weighted ? kSampleWeights : std::vector<float>(7, 1.0f);
    Dataset d = Dataset::from_arrays(kIds.data(), DType::F32, {7, 4}, kTags.data(), DType::F32, {7, 4},
                                     weighted ? w.data() : nullptr);
    d.batch(2, false);  // batches of 2, 2, 2 (the third fully masked) and 1
    const EvalResult got = m.evaluate(d);
    const EvalResult want = keras_masked(p, kIds, kTags, w, 4, 2);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
    EXPECT_NEAR(got.accuracy, want.accuracy, 1e-6);
    // Masked steps with any label change nothing; the unmasked mean over the whole data does.
    std::vector<float> other = kTags;
    for (size_t k = 0; k < other.size(); ++k)
      if (kIds[k] == 0) other[k] = 2;
    Dataset relabelled = Dataset::from_arrays(kIds.data(), DType::F32, {7, 4}, other.data(), DType::F32, {7, 4},
                                              weighted ? w.data() : nullptr);
    relabelled.batch(2, false);
    const EvalResult same = m.evaluate(relabelled);
    EXPECT_EQ(same.loss, got.loss);
    EXPECT_EQ(same.accuracy, got.accuracy);
    const EvalResult one_batch = keras_masked(p, kIds, kTags, w, 4, 7);
    EXPECT_GT(std::abs(one_batch.loss - want.loss), 1e-3 * want.loss);  // batch by batch: the test can fail
  }
  const EvalResult on_batch = m.test_on_batch(kIds.data(), kTags.data(), 7);
  const EvalResult want = keras_masked(p, kIds, kTags, std::vector<float>(7, 1.0f), 4, 7);
  EXPECT_NEAR(on_batch.loss, want.loss, 1e-5 * want.loss);
  EXPECT_NEAR(on_batch.accuracy, want.accuracy, 1e-6);
}

// The gradient is the masked mean's: one SGD step (rate 1) moves the output bias by
// -sum(w * mask * (p - onehot)) / (unmasked steps).
TEST(KerasMasks, AMaskedLossesGradientIsOverTheUnmaskedSteps) {
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.learning_rate = 1.0;
  Model m = labeller(4, false, {"cpu"}, sgd);
  const int64_t n = 4;
  const std::vector<float> p = m.predict(kIds.data(), n), before = m.get_weights();
  std::vector<double> grad(3, 0.0);
  double valid = 0;
  for (int64_t at = 0; at < n * 4; ++at) {
    if (kIds[static_cast<size_t>(at)] == 0) continue;
    valid += 1;
    for (int64_t c = 0; c < 3; ++c)
      grad[static_cast<size_t>(c)] += p[static_cast<size_t>(at * 3 + c)] - (kTags[static_cast<size_t>(at)] == c ? 1.0 : 0.0);
  }
  m.train_on_batch(kIds.data(), kTags.data(), n);
  const std::vector<float> after = m.get_weights();
  const size_t bias = after.size() - 3;
  for (size_t c = 0; c < 3; ++c)
    EXPECT_NEAR(after[bias + c] - before[bias + c], -grad[c] / valid, 1e-5) << c;
}

// Two replicas, each holding half of every batch with its own count of kept steps, train as one:
// the loss is normalised by the global batch's unmasked steps. A fully masked batch (the third)
// has loss 0 and a zero gradient, as Keras's divide_no_nan: nothing turns NaN.
TEST(KerasMasks, AMaskedLossTrainsTheSameOnTwoReplicasAndSurvivesAFullyMaskedBatch) {
  std::vector<std::vector<float>> after;
  std::vector<double> losses;
  for (const std::vector<std::string>& replicas : {std::vector<std::string>{"cpu"}, {"cpu", "cpu"}}) {
    Model m = labeller(4, true, replicas);
    Dataset d = Dataset::from_arrays(kIds.data(), DType::F32, {7, 4}, kTags.data(), DType::F32, {7, 4},
                                     kSampleWeights.data());
    d.batch(4, false);
    FitOptions o;
    o.epochs = 2;
    History h;
    EXPECT_EQ(m.fit(d, o, nullptr, &h), Status::Ok);
    after.push_back(m.get_weights());
    losses.push_back(m.evaluate(d).loss);
  }
  EXPECT_LE(test::relative_difference(after[0], after[1]), 1e-5);
  EXPECT_NEAR(losses[0], losses[1], 1e-5 * losses[0]);

  Model m = labeller(4, true);
  const std::vector<float> before = m.get_weights();
  const EvalResult masked = m.train_on_batch(kIds.data() + 16, kTags.data() + 16, 2);  // every step masked
  EXPECT_EQ(masked.loss, 0.0);
  EXPECT_EQ(masked.accuracy, 0.0);
  EXPECT_EQ(m.get_weights(), before);  // Adam's first step with a zero gradient moves nothing
  const EvalResult next = m.train_on_batch(kIds.data(), kTags.data(), 7);
  EXPECT_TRUE(std::isfinite(next.loss) && next.loss > 0);
  for (float v : m.get_weights()) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(m.get_weights(), before);
}

// Under a mixed policy the masked loss trains as in float32 within the 16-bit types' rounding (float16's
// loss scale multiplies the gradient before the mask's factor does), with a fully masked batch among
// its batches.
TEST(KerasMasks, AMaskedLossTrainsUnderMixedPrecision) {
  Dataset d = Dataset::from_arrays(kIds.data(), DType::F32, {7, 4}, kTags.data(), DType::F32, {7, 4});
  d.batch(2, false);
  FitOptions o;
  o.epochs = 3;
  std::vector<double> losses;
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16}) {
    SCOPED_TRACE(precision_name(p));
    Model m = labeller(4, true, {"cpu"}, {}, p);
    History h;
    EXPECT_EQ(m.fit(d, o, nullptr, &h), Status::Ok);
    for (float v : m.get_weights()) ASSERT_TRUE(std::isfinite(v));
    losses.push_back(m.evaluate(d).loss);
    EXPECT_NEAR(losses.back(), losses.front(), 2e-2 * losses.front());
  }
}

// A mask over fewer steps than the loss's positions (a binary loss over a whole sample) is refused.
TEST(KerasMasks, AMaskThatIsNotOnePerLossPositionIsRefused) {
  Model m = Model::functional(Strategy::default_strategy(), {3}, "tokens");
  m.add_layer(R"({"class_name": "Embedding", "config": {"name": "emb", "input_dim": 9, "output_dim": 4, "mask_zero": true}})",
              {"tokens"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "tags", "units": 1, "activation": "sigmoid"}})", {"emb"});
  CompileOptions o;
  o.loss.kind = LossKind::BinaryCrossentropy;
  m.compile(o);
  const std::vector<float> ids{3, 7, 0}, labels{1, 0, 0};
  try {
    m.train_on_batch(ids.data(), labels.data(), 1);
    ADD_FAILURE() << "a binary loss over the whole sample took a mask of 3 steps";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"emb\""), std::string::npos) << e.what();
  }
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
