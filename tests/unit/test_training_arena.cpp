// The step plan's arena: buffers whose lifetimes do not overlap share memory, and training with that
// reuse gives the bits of training with every buffer apart (the no_arena_reuse hook, whose arena starts
// as NaN); Model::training_memory reports what the plan allocates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "config/test_hooks.hpp"
#include "kx/applications.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

enum class Arena {
  Apart,   // every buffer its own memory (the reference)
  Packed,  // buffers whose lifetimes do not overlap share memory
  // Packed, every buffer zeroed right after its last use: a layer reading a buffer that the plan holds
  // dead (a wrong backward_reads_input or _output) computes from zeros.
  PackedZeroedWhenDead,
};

// Sets the hooks for one scope: later tests see the defaults again.
class ArenaHooks {
 public:
  explicit ArenaHooks(Arena a) {
    config::test_hooks().no_arena_reuse = a == Arena::Apart;
    config::test_hooks().zero_dead_buffers = a == Arena::PackedZeroedWhenDead;
  }
  ~ArenaHooks() {
    config::test_hooks().no_arena_reuse = false;
    config::test_hooks().zero_dead_buffers = false;
  }
  ArenaHooks(const ArenaHooks&) = delete;
  ArenaHooks& operator=(const ArenaHooks&) = delete;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every kind of reader the plan distinguishes: a tensor with three readers (the sum of their
// gradients), layers whose backward reads x, y, both or neither, a 1x1 convolution (no columns), a
// reshape, dropout's mask and batch normalisation's statistics.
Model every_reader(const Strategy& s) {
  Model m = Model::functional(s, {10, 10, 3}, "x");
  m.add_layer(R"({"class_name": "ZeroPadding2D", "config": {"name": "pad", "padding": 1}})", {"x"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c1", "filters": 6, "kernel_size": 3}})", {"pad"});
  m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn"}})", {"c1"});
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "r1"}})", {"bn"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c2", "filters": 6, "kernel_size": 3, "padding": "same"}})",
              {"r1"});
  m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c3", "filters": 6, "kernel_size": 1, "activation": "relu"}})",
              {"r1"});
  // Issue 34's layers: a depthwise convolution, ReLU with settings and LeakyReLU (their backward reads
  // x, where the plain ReLU's reads y), a rescaling.
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw", "kernel_size": 3, "padding": "same"}})",
              {"r1"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "mix"}})", {"dw", "c3"});  // its backward reads nothing
  m.add_layer(R"({"class_name": "ReLU", "config": {"name": "r6", "max_value": 6.0, "negative_slope": 0.1}})", {"mix"});
  m.add_layer(R"({"class_name": "LeakyReLU", "config": {"name": "leaky", "negative_slope": 0.2}})", {"r6"});
  m.add_layer(R"({"class_name": "Rescaling", "config": {"name": "scaled", "scale": 0.5, "offset": 0.1}})", {"leaky"});
  m.add_layer(R"({"class_name": "Rescaling", "config": {"name": "per_channel", "scale": [0.5, 2, -1, 1, 0.25, 3],
      "offset": [0, 0.1, 0.2, 0.3, 0.4, 0.5]}})", {"scaled"});
  // And its convolutions and resampling: separable (keeps its depthwise output as scratch), transposed,
  // bilinear upsampling (reads neither x nor y), and a sequence branch through Conv1D and 1-D pooling.
  m.add_layer(R"({"class_name": "SeparableConv2D", "config": {"name": "sep", "filters": 6, "kernel_size": 3,
      "padding": "same", "depth_multiplier": 2, "activation": "relu"}})", {"r1"});
  m.add_layer(R"({"class_name": "Conv2DTranspose", "config": {"name": "tr", "filters": 6, "kernel_size": 3,
      "padding": "same"}})", {"r1"});
  m.add_layer(R"({"class_name": "AveragePooling2D", "config": {"name": "half", "pool_size": 2}})", {"r1"});
  m.add_layer(R"({"class_name": "UpSampling2D", "config": {"name": "up", "interpolation": "bilinear"}})", {"half"});
  m.add_layer(R"({"class_name": "Reshape", "config": {"name": "seq", "target_shape": [100, 6]}})", {"r1"});
  m.add_layer(R"({"class_name": "Conv1D", "config": {"name": "c1d", "filters": 4, "kernel_size": 3,
      "padding": "causal", "dilation_rate": 2, "activation": "tanh"}})", {"seq"});
  m.add_layer(R"({"class_name": "MaxPooling1D", "config": {"name": "mp1d"}})", {"c1d"});
  m.add_layer(R"({"class_name": "AveragePooling1D", "config": {"name": "ap1d", "pool_size": 3, "strides": 2}})",
              {"mp1d"});
  m.add_layer(R"({"class_name": "GlobalAveragePooling1D", "config": {"name": "gap1d"}})", {"ap1d"});
  // Squeeze-and-excite with Keras's activations whose gradients read the kept pre-activation (swish in
  // a depthwise convolution) or x (hard_sigmoid), the broadcast Multiply and an operation on tensors.
  m.add_layer(R"({"class_name": "DepthwiseConv2D", "config": {"name": "dw_swish", "kernel_size": 3, "padding": "same",
              "activation": "swish"}})",
              {"r1"});
  m.add_layer(R"({"class_name": "GlobalAveragePooling2D", "config": {"name": "squeeze", "keepdims": true}})", {"dw_swish"});
  m.add_layer(R"({"class_name": "Activation", "config": {"name": "gate", "activation": "hard_sigmoid"}})", {"squeeze"});
  m.add_layer(R"({"class_name": "Multiply", "config": {"name": "excite"}})", {"dw_swish", "gate"});
  m.add_layer(R"({"class_name": "TensorOperation", "config": {"name": "flip", "operation": "Subtract",
              "arguments": [1.0, null]}})",
              {"excite"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "sum"}})", {"r1", "c2", "c3", "per_channel", "sep", "tr", "up", "flip"});
  m.add_layer(R"({"class_name": "Activation", "config": {"name": "act", "activation": "tanh"}})", {"sum"});
  m.add_layer(R"({"class_name": "MaxPooling2D", "config": {"name": "mp", "pool_size": 2}})", {"act"});
  m.add_layer(R"({"class_name": "AveragePooling2D", "config": {"name": "ap", "pool_size": 2}})", {"act"});
  m.add_layer(R"({"class_name": "Concatenate", "config": {"name": "cat"}})", {"mp", "ap"});
  m.add_layer(R"({"class_name": "Dropout", "config": {"name": "drop", "rate": 0.25}})", {"cat"});
  m.add_layer(R"({"class_name": "Flatten", "config": {"name": "flat"}})", {"drop"});
  m.add_layer(R"({"class_name": "Concatenate", "config": {"name": "both"}})", {"flat", "gap1d"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "hidden", "units": 8, "activation": "relu"}})", {"both"});
  // Issue 35's: self-attention with dropout (its backward reads its inputs, and its scratch holds the
  // attention), a residual, layer normalisation (reads x) and Dense on a sequence.
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "gelu", "units": 8, "activation": "gelu"}})", {"hidden"});
  m.add_layer(R"({"class_name": "Reshape", "config": {"name": "seq_att", "target_shape": [4, 2]}})", {"gelu"});
  m.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"name": "att", "num_heads": 2, "key_dim": 2,
                 "dropout": 0.1}, "kwargs": {"use_causal_mask": true}})",
              {"seq_att", "seq_att"});
  m.add_layer(R"({"class_name": "Add", "config": {"name": "res"}})", {"seq_att", "att"});
  m.add_layer(R"({"class_name": "LayerNormalization", "config": {"name": "ln"}})", {"res"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "per_step", "units": 3, "activation": "tanh"}})", {"ln"});
  m.add_layer(R"({"class_name": "Flatten", "config": {"name": "flat_seq"}})", {"per_step"});
  m.add_layer(R"({"class_name": "Dense", "config": {"name": "out", "units": 4, "activation": "softmax"}})", {"flat_seq"});
  return m;
}

struct Trained {
  std::vector<float> weights, predictions;
  TrainingMemory memory;
};

Trained train_every_reader(Arena arena, Precision precision, bool two_replicas = false) {
  const ArenaHooks hooks(arena);
  Strategy s = two_replicas ? Strategy::mirrored({"cpu", "cpu"}) : Strategy::default_strategy();
  Model m = every_reader(s);
  CompileOptions co;
  co.precision = precision;
  co.accuracy = true;
  m.compile(co);
  const int64_t n = 24;
  std::vector<float> x = test::random_floats(n * 10 * 10 * 3, 3), y(n);
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 4);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 10, 10, 3}, y.data(), DType::F32, {n});
  d.batch(8, false);
  FitOptions fo;
  fo.epochs = 2;
  EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  Trained t;
  t.weights = m.get_weights();
  t.predictions = m.predict(x.data(), n);
  t.memory = m.training_memory(8);
  return t;
}

// Compiles a model over 7 token ids from a vocabulary of 300 (every fifth id 0, the padding), trains
// three steps on 8 samples of 3 classes, and returns its weights and predictions.
std::pair<std::vector<float>, std::vector<float>> train_on_tokens(Model& m, Precision p) {
  CompileOptions co;
  co.precision = p;
  m.compile(co);
  const int64_t n = 8;
  std::vector<float> x(n * 7), y(n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 300 * ((i % 5) != 0));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 3);
  for (int step = 0; step < 3; ++step) m.train_on_batch(x.data(), y.data(), n);
  return std::make_pair(m.get_weights(), m.predict(x.data(), n));
}

TEST(TrainingArena, ReuseTrainsBitForBitAsBuffersApartInEveryPrecision) {
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16}) {
    SCOPED_TRACE(precision_name(p));
    const Trained apart = train_every_reader(Arena::Apart, p), packed = train_every_reader(Arena::Packed, p);
    const Trained zeroed = train_every_reader(Arena::PackedZeroedWhenDead, p);
    EXPECT_TRUE(same_bits(apart.weights, packed.weights));
    EXPECT_TRUE(same_bits(apart.predictions, packed.predictions));
    EXPECT_TRUE(same_bits(apart.weights, zeroed.weights));
    EXPECT_TRUE(same_bits(apart.predictions, zeroed.predictions));
    for (float w : packed.weights) ASSERT_TRUE(std::isfinite(w));
    EXPECT_LT(packed.memory.step_arena, apart.memory.step_arena);
    EXPECT_EQ(apart.memory.step_arena, apart.memory.step_arena_without_reuse);
  }
}

TEST(TrainingArena, ReuseTrainsBitForBitAsBuffersApartWithTwoReplicas) {
  const Trained apart = train_every_reader(Arena::Apart, Precision::Float32, true);
  const Trained packed = train_every_reader(Arena::PackedZeroedWhenDead, Precision::Float32, true);
  EXPECT_TRUE(same_bits(apart.weights, packed.weights));
  EXPECT_EQ(packed.memory.rows, 4);  // each replica's share of the batch of 8
}

// Issue 35's sequence layers: an Embedding's mask (in its scratch) read by recurrent layers whose
// backward reads x and their scratch but not y; int32-like ids, which mixed precision leaves as they are;
// and with dropout and recurrent_dropout, whose masks the scratch keeps and whose masked states the
// workspace holds per call.
TEST(TrainingArena, SequenceLayersTrainBitForBitAsBuffersApart) {
  auto train = [](Arena arena, Precision p, const std::string& drop) {
    const ArenaHooks hooks(arena);
    Model m = Model::sequential(Strategy::default_strategy(), {7});
    m.add_layer(R"({"class_name": "Embedding", "config": {"input_dim": 300, "output_dim": 4, "mask_zero": true}})");
    m.add_layer(R"({"class_name": "Bidirectional", "config": {"layer": {"class_name": "LSTM",
                   "config": {"units": 3, "return_sequences": true)" + drop + "}}}}");
    m.add_layer(R"({"class_name": "GRU", "config": {"units": 4)" + drop + "}}");
    m.add_layer(R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})");
    return train_on_tokens(m, p);
  };
  for (const std::string drop : {"", R"(, "dropout": 0.2, "recurrent_dropout": 0.3)"})
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16}) {
    SCOPED_TRACE(std::string(precision_name(p)) + drop);
    const auto apart = train(Arena::Apart, p, drop), zeroed = train(Arena::PackedZeroedWhenDead, p, drop);
    EXPECT_TRUE(same_bits(apart.first, zeroed.first));
    EXPECT_TRUE(same_bits(apart.second, zeroed.second));
    for (float w : zeroed.first) ASSERT_TRUE(std::isfinite(w));
  }
}

// Masking's mask (its scratch, which its backward reads; not its x nor its y) read by an LSTM: embedded
// tokens through ReLU give steps of all zeros, which it masks.
TEST(TrainingArena, MaskingTrainsBitForBitAsBuffersApart) {
  auto train = [](Arena arena, Precision p) {
    const ArenaHooks hooks(arena);
    Model m = Model::sequential(Strategy::default_strategy(), {7});
    m.add_layer(R"({"class_name": "Embedding", "config": {"input_dim": 300, "output_dim": 2}})");
    m.add_layer(R"({"class_name": "ReLU", "config": {}})");
    m.add_layer(R"({"class_name": "Masking", "config": {"mask_value": 0.0}})");
    m.add_layer(R"({"class_name": "LSTM", "config": {"units": 3}})");
    m.add_layer(R"({"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}})");
    return train_on_tokens(m, p);
  };
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16}) {
    SCOPED_TRACE(precision_name(p));
    const auto apart = train(Arena::Apart, p), zeroed = train(Arena::PackedZeroedWhenDead, p);
    EXPECT_TRUE(same_bits(apart.first, zeroed.first));
    EXPECT_TRUE(same_bits(apart.second, zeroed.second));
    for (float w : zeroed.first) ASSERT_TRUE(std::isfinite(w));
  }
}

// Keras masks through an attention block: the Embedding's mask (its scratch) read by the attention,
// whose workspace holds the masks' AND in forward and again in backward, an Add ORing two masks into
// its scratch, and the masked average.
TEST(TrainingArena, MaskedAttentionTrainsBitForBitAsBuffersApart) {
  auto train = [](Arena arena, Precision p) {
    const ArenaHooks hooks(arena);
    Model m = Model::functional(Strategy::default_strategy(), {7}, "ids");
    m.add_layer(R"({"class_name": "Embedding", "config": {"name": "e", "input_dim": 300, "output_dim": 4, "mask_zero": true}})", {"ids"});
    m.add_layer(R"({"class_name": "Embedding", "config": {"name": "f", "input_dim": 300, "output_dim": 4, "mask_zero": true}})", {"ids"});
    m.add_layer(R"({"class_name": "Add", "config": {"name": "both"}})", {"e", "f"});
    m.add_layer(R"({"class_name": "Dense", "config": {"name": "d", "units": 6}})", {"both"});
    m.add_layer(R"({"class_name": "MultiHeadAttention", "config": {"name": "a", "num_heads": 2, "key_dim": 3}})", {"d", "e"});
    m.add_layer(R"({"class_name": "LayerNormalization", "config": {"name": "n"}})", {"a"});
    m.add_layer(R"({"class_name": "GlobalAveragePooling1D", "config": {"name": "p"}})", {"n"});
    m.add_layer(R"({"class_name": "Dense", "config": {"name": "o", "units": 3, "activation": "softmax"}})", {"p"});
    return train_on_tokens(m, p);
  };
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16}) {
    SCOPED_TRACE(precision_name(p));
    const auto apart = train(Arena::Apart, p), zeroed = train(Arena::PackedZeroedWhenDead, p);
    EXPECT_TRUE(same_bits(apart.first, zeroed.first));
    EXPECT_TRUE(same_bits(apart.second, zeroed.second));
    for (float w : zeroed.first) ASSERT_TRUE(std::isfinite(w));
    for (float v : zeroed.second) ASSERT_TRUE(std::isfinite(v));
  }
}

// A deep model: most activations and gradients are dead most of the step.
TEST(TrainingArena, ResNet50TrainsBitForBitInAFractionOfTheBuffersApart) {
  auto train = [](Arena arena) {
    const ArenaHooks hooks(arena);
    Model m = applications::resnet50(Strategy::default_strategy(), {32, 32, 3}, true, 4);
    m.compile(CompileOptions{});
    const int64_t n = 4;
    std::vector<float> x = test::random_floats(n * 32 * 32 * 3, 12), y(n);
    for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 4);
    for (int step = 0; step < 2; ++step) m.train_on_batch(x.data(), y.data(), n);
    return std::make_pair(m.get_weights(), m.training_memory(n));
  };
  const auto [apart, apart_memory] = train(Arena::Apart);
  const auto [packed, memory] = train(Arena::PackedZeroedWhenDead);
  EXPECT_TRUE(same_bits(apart, packed));
  EXPECT_EQ(apart_memory.step_arena, memory.step_arena_without_reuse);
  EXPECT_LT(memory.step_arena * 3, memory.step_arena_without_reuse)
      << memory.step_arena << " bytes against " << memory.step_arena_without_reuse << " apart";
}

// Batch normalisation writes its input's gradient over its output's: one block for both where it alone
// writes that gradient, and the bits of a block apart, trainable or frozen, with or without the activation
// it applies (ReLU6 clips, swish does not); a normalisation whose input another layer reads first keeps
// a block of its own.
TEST(TrainingArena, BatchNormalizationWritesItsInputGradientOverItsOutputs) {
  struct Case {
    const char* activation;
    bool frozen;
  };
  for (const Case k : {Case{"relu6", false}, Case{"relu6", true}, Case{"swish", false}, Case{"swish", true},
                       Case{"linear", false}}) {
    SCOPED_TRACE(std::string(k.activation) + (k.frozen ? " frozen" : ""));
    auto train = [&](bool in_place) {
      config::test_hooks().no_in_place_grads = !in_place;
      Model m = Model::functional(Strategy::default_strategy(), {6, 6, 3}, "x");
      m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c1", "filters": 4, "kernel_size": 3,
          "padding": "same"}})", {"x"});
      m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn1"}})", {"c1"});
      m.add_layer(std::string(R"({"class_name": "Activation", "config": {"name": "a1", "activation": ")") +
                      k.activation + R"("}})",
                  {"bn1"});
      m.add_layer(R"({"class_name": "Conv2D", "config": {"name": "c2", "filters": 5, "kernel_size": 1}})", {"a1"});
      // c2's output is read first by the flatten below, so bn2 does not write its gradient.
      m.add_layer(R"({"class_name": "Flatten", "config": {"name": "side"}})", {"c2"});
      m.add_layer(R"({"class_name": "BatchNormalization", "config": {"name": "bn2"}})", {"c2"});
      m.add_layer(R"({"class_name": "Flatten", "config": {"name": "flat"}})", {"bn2"});
      m.add_layer(R"({"class_name": "Concatenate", "config": {"name": "both"}})", {"flat", "side"});
      m.add_layer(R"({"class_name": "Dense", "config": {"name": "out", "units": 3, "activation": "softmax"}})",
                  {"both"});
      if (k.frozen) m.set_trainable("bn1", false);
      m.compile(CompileOptions{});
      const int64_t n = 4;
      std::vector<float> x = test::random_floats(n * 6 * 6 * 3, 5), y{0, 1, 2, 1};
      for (int step = 0; step < 2; ++step) m.train_on_batch(x.data(), y.data(), n);
      auto trained = std::make_pair(m.get_weights(), m.training_memory(n));
      config::test_hooks().no_in_place_grads = false;
      return trained;
    };
    const auto [apart, apart_memory] = train(false);
    const auto [in_place, memory] = train(true);
    EXPECT_TRUE(same_bits(apart, in_place));
    for (float w : in_place) ASSERT_TRUE(std::isfinite(w));
    // Exactly bn1's input gradient (4 samples of 6x6x4) is spared.
    EXPECT_EQ(apart_memory.layer_gradients - memory.layer_gradients, 4 * 6 * 6 * 4 * 4);
  }
}

TEST(TrainingMemory, ReportsWhatFitAllocates) {
  Model m = Model::sequential(Strategy::default_strategy(), {6, 6, 2});
  m.add_conv2d(4, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_flatten();
  m.add_dropout(0.5f);
  m.add_dense(3, Activation::Softmax);
  EXPECT_EQ(test::status_of([&] { m.training_memory(8); }), Status::Misuse);
  CompileOptions co;  // Adam: two slots per weight
  m.compile(co);
  EXPECT_EQ(test::status_of([&] { m.training_memory(0); }), Status::InvalidArgument);
  const TrainingMemory r = m.training_memory(5);
  const int64_t weights = m.num_params() * 4;
  EXPECT_EQ(r.batch, 5);
  EXPECT_EQ(r.rows, 5);
  EXPECT_EQ(r.weights, weights);
  EXPECT_EQ(r.weight_gradients, weights);
  EXPECT_EQ(r.optimizer_slots, 2 * weights);
  // Bytes of a block of n floats: whole 256-byte blocks.
  auto block = [](int64_t n) { return (n + 63) / 64 * 64 * 4; };
  // The input, the convolution's output, the dropout's and the model's (flatten is a view).
  EXPECT_EQ(r.activations, block(5 * 72) + block(5 * 64) + block(5 * 64) + block(5 * 3));
  // Those but the input's; the convolution's columns (4x4 positions of 3x3x2); the dropout mask.
  EXPECT_EQ(r.layer_gradients, block(5 * 64) + block(5 * 64) + block(5 * 3));
  EXPECT_EQ(r.workspace, block(5 * 16 * 18));
  EXPECT_EQ(r.scratch, 5 * 64 * 4);
  EXPECT_EQ(r.step_arena_without_reuse, r.activations + r.layer_gradients + r.workspace);
  EXPECT_LE(r.step_arena, r.step_arena_without_reuse);
  EXPECT_EQ(r.total(), r.weights + r.weight_gradients + r.optimizer_slots + r.step_arena + r.scratch + r.batch_buffers);

  std::vector<float> x = test::random_floats(5 * 72, 1), y{0, 1, 2, 0, 1};
  config::test_hooks().training_arena_bytes = -1;
  m.train_on_batch(x.data(), y.data(), 5);
  EXPECT_EQ(config::test_hooks().training_arena_bytes.load(), r.step_arena);
}

}  // namespace
}  // namespace kx
