// A model: a graph of layers (a Sequential stack or a Functional graph), compiled into a static
// training-step plan.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kx/callback.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"
#include "kx/layer.hpp"
#include "kx/loss.hpp"
#include "kx/optimizer.hpp"
#include "kx/strategy.hpp"
#include "kx/tensor.hpp"

namespace kx {

// Keras's dtype policy. Mixed: layers compute in the 16-bit type (every layer output and every
// gradient between layers holds a 16-bit value, stored in float32); weights, optimizer slots, the
// loss with its softmax/sigmoid, batch normalisation and the all-reduce stay float32.
enum class Precision { Float32 = 0, MixedBfloat16 = 1, MixedFloat16 = 2 };
const char* precision_name(Precision p);  // Keras's policy name: "float32", "mixed_bfloat16", ...

struct CompileOptions {
  OptimizerConfig optimizer;
  LossConfig loss;
  bool accuracy = false;  // track the "accuracy" metric during fit
  uint64_t seed = 0;      // 0: a fixed default seed
  Precision precision = Precision::Float32;
  // MixedFloat16: Keras's LossScaleOptimizer (dynamic). The first loss scale (a power of two), and the
  // finite steps in a row after which it doubles; a step with gradients that are not finite is
  // skipped and halves it.
  double initial_loss_scale = 32768;
  int64_t loss_scale_growth_steps = 2000;
};

struct FitOptions {
  int32_t epochs = 1;
  int32_t initial_epoch = 0;
  int64_t steps_per_epoch = 0;  // 0: one pass over the data
  Dataset* validation = nullptr;
  int64_t validation_steps = 0;  // 0: the whole validation set
  int32_t verbose = 0;           // 0 silent, 1 progress bar, 2 a line per epoch
  std::string resume_from;
  // Keras's validation_split: without `validation`, the last fraction of the training data (in storage
  // order, before any shuffle) is held out and evaluated after each epoch; [0, 1), 0 = none.
  double validation_split = 0;
  // Keras's class_weight: the loss of a training sample of class c weighs class_weight[c] (classes
  // beyond the vector weigh 1). Empty: none.
  std::vector<float> class_weight;
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// One tensor of a model's weights, as Keras's model.weights lists them.
struct WeightInfo {
  std::string name;    // "<layer>/<weight>": "dense_1/kernel", "conv1_bn/moving_mean"
  Shape shape;         // Keras's shape: Dense kernel [in, units], Conv2D kernel [kh, kw, in, filters]
  int64_t offset = 0;  // of its first value in get_weights()' flat vector
  bool trainable = true;  // false for state such as moving statistics
};

// What load_weights did.
struct WeightsReport {
  int64_t loaded = 0;   // tensors copied into the model
  int64_t skipped = 0;  // tensors of the model left as they were (absent or of another shape)
};

// What one replica's training step holds in its device's memory, in bytes, for a global batch
// (Model::training_memory). The dataset is not counted: the CPU reads it where it is; a GPU holds a
// copy of it when it fits in its memory, and streams it otherwise.
struct TrainingMemory {
  int64_t batch = 0;  // the global batch asked about
  int64_t rows = 0;   // the rows of it the replica holds (the largest share)
  int64_t weights = 0;           // and their 16-bit copy under a mixed precision
  int64_t weight_gradients = 0;  // one per weight
  int64_t optimizer_slots = 0;   // Adam's two moments, SGD's momentum, the EMA of the weights
  // The step's arena: every activation, every gradient between layers and every layer's workspace
  // (a convolution's columns), where buffers whose lifetimes do not overlap share memory.
  int64_t step_arena = 0;
  // What the arena's buffers add up to each apart (the arena without reuse), and that sum by kind.
  int64_t step_arena_without_reuse = 0;
  int64_t activations = 0, layer_gradients = 0, workspace = 0;
  int64_t scratch = 0;        // layers' state kept from forward to backward (statistics, dropout masks)
  int64_t batch_buffers = 0;  // the batch's labels, sample weights and indices
  int64_t total() const {
    return weights + weight_gradients + optimizer_slots + step_arena + scratch + batch_buffers;
  }
};

class Model {
 public:
  static Model sequential(const Strategy& strategy, const Shape& input_shape);
  // A model whose layers name the layers they read (add(spec, inbound)); the input is input_name.
  static Model functional(const Strategy& strategy, const Shape& input_shape,
                          const std::string& input_name = "input_layer");
  // A Sequential or Functional config as Keras writes it (and to_json).
  static Model from_json(const Strategy& strategy, const std::string& json);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // Appends a layer that reads the last layer's output (or the input).
  void add(LayerSpec spec);
  // Appends a layer that reads the outputs of the named earlier layers (or the input's name), in
  // order: Add and Concatenate take several. The last layer added is the model's output.
  void add(LayerSpec spec, const std::vector<std::string>& inbound);
  // Any layer kx has, from its Keras config {"class_name": "Dense", "config": {"units": 10, ...}}
  // (settings left out take Keras's defaults), reading the named earlier layers or, with none, the
  // last layer (or the input). Returns the layer's name, generated as Keras does when the config has
  // none. Throws InvalidArgument for bad JSON, an unknown class or setting values, Misuse once compiled.
  std::string add_layer(const std::string& keras_layer_json, const std::vector<std::string>& inbound = {});
  std::vector<std::string> layer_names() const;
  // A frozen layer (trainable false) keeps its weights; BatchNormalization then uses its moving
  // statistics. Takes effect at the next step. Throws InvalidArgument for an unknown name.
  void set_trainable(const std::string& layer, bool trainable);
  bool trainable(const std::string& layer) const;
  // Dense, as Keras: y = act(x W + b); use_bias false leaves b out.
  void add_dense(int64_t units, Activation act = Activation::None, bool use_bias = true);
  // Conv2D over (height, width, channels) samples, as Keras: kernel [kh, kw, in, filters], same stride
  // both ways, "valid" or "same" padding; use_bias false leaves the bias out.
  void add_conv2d(int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride = 1,
                  Padding padding = Padding::Valid, Activation act = Activation::None, bool use_bias = true);
  // MaxPooling2D with strides equal to the pool size and "valid" padding (Keras's defaults).
  void add_max_pool2d(int64_t pool_h = 2, int64_t pool_w = 2);
  // keras.layers.Normalization(mean=..., variance=...) over the last axis: y = (x - mean) /
  // sqrt(variance), one value per channel or one for every channel. Dataset::feature_moments finds
  // them (Keras's adapt). The statistics are non-trainable weights of the layer.
  void add_normalization(const FeatureMoments& moments);
  void add_flatten();
  void add_dropout(float rate);

  void compile(const CompileOptions& options);
  bool compiled() const;
  int64_t num_params() const;            // every weight, as Keras's "Total params"
  int64_t num_trainable_params() const;  // those the optimizer trains now
  const Shape& input_shape() const;
  const Shape& output_shape() const;
  std::string to_json() const;
  // Keras 3's model.summary() text: the layers' table and the parameter totals. line_length: the
  // table's width (Keras's line_length); 0 is Keras's default for the layout (88 for a chain of layers,
  // 108 with the "Connected to" column of other graphs).
  std::string summary(int line_length = 0) const;

  // Every weight as one flat vector, layer after layer in the order they were added (weights() gives
  // each tensor's offset in it).
  std::vector<float> get_weights() const;
  void set_weights(const std::vector<float>& w);
  // The same from n values at w: InvalidArgument unless n is num_params(), before w is read.
  void set_weights(const float* w, size_t n);
  // The model's tensors in Keras's model.weights order: layers as Keras orders a functional model's
  // (a Sequential's in order), each layer's as Keras (kernel, bias; gamma, beta, moving_mean,
  // moving_variance). Available before compile.
  std::vector<WeightInfo> weights() const;
  // One tensor by name, its values in row-major order. Throws Misuse before compile,
  // InvalidArgument for an unknown name or (set) a wrong count.
  std::vector<float> get_weight(const std::string& name) const;
  void set_weight(const std::string& name, const float* values, size_t count);

  // One safetensors file with the config, compile settings, weights and optimizer state, written
  // durably (a crash leaves the old file or the new one). Throws Misuse before compile, Io.
  void save(const std::string& path) const;
  // Weights by name ("<layer>/<weight>") from a safetensors file (a saved model, a checkpoint, or
  // any file with float32 tensors of those names), or by layer from a Keras weights file
  // (.weights.h5, a legacy .h5, a .keras file's weights). With skip_mismatch, tensors of the model that the
  // file lacks or holds with another shape are left as they are and counted; without it they are
  // InvalidArgument and nothing changes. Throws Misuse before compile, Io, Corrupt.
  WeightsReport load_weights(const std::string& path, bool skip_mismatch);
  // A model saved by save() or a checkpoint, compiled as it was, on `strategy` (any replica count).
  // Throws Io, Corrupt (damaged or not a kx file).
  static Model load(const Strategy& strategy, const std::string& path);
  // A Keras model file: .keras (Keras 3) or a legacy .h5 full model (model.save("x.h5")), with its
  // architecture and weights; compiled as Keras compiled it (optimizer state included, so training
  // continues where Keras left off), or uncompiled (with its weights) when Keras never compiled it.
  // Throws Unsupported naming the layer class, op or attribute kx cannot train, or when libhdf5 is
  // unavailable; Corrupt for a damaged file; InvalidArgument for a weights-only file; Io.
  static Model load_keras(const Strategy& strategy, const std::string& path);
  // The model as a .keras file keras.models.load_model opens: config, compile config, weights and
  // optimizer state. Written durably. Throws Misuse before compile, Unsupported without libhdf5, Io.
  void save_keras(const std::string& path) const;
  // An ONNX file (opset 13) for inference that runtimes run with predict's outputs (kx.h's
  // kx_model_export_onnx says what it holds). Throws Misuse before compile, Unsupported for a layer
  // ONNX export does not know, Io.
  void export_onnx(const std::string& path) const;

  // Returns Status::Ok, or Status::Stopped when a callback stopped training.
  Status fit(Dataset& train, const FitOptions& options, const Callbacks* callbacks, History* history);
  // verbose 1 or 2: Keras's progress bar on stdout (the chief's).
  EvalResult evaluate(const Dataset& data, int verbose = 0);
  // Keras's train_on_batch: one optimizer step on these n samples as one global batch (split across
  // the replicas), exactly the step fit takes on that batch; returns the batch's loss and accuracy
  // (NaN without the metric), as computed before the update. x: n samples of the input shape; y: n
  // labels (sparse cross-entropy; one per position, n * numel(output_shape without its last axis), for
  // an output of more than one axis) or n * numel(output_shape) targets. Throws Misuse before compile,
  // InvalidArgument for bad sizes or labels.
  EvalResult train_on_batch(const float* x, const float* y, int64_t n);
  // Keras's test_on_batch: the loss and accuracy of these n samples, without training.
  EvalResult test_on_batch(const float* x, const float* y, int64_t n);
  // x: n samples of the input shape; returns n * numel(output_shape) floats.
  std::vector<float> predict(const float* x, int64_t n);
  // Same, into a caller buffer of at least n * numel(output_shape) floats.
  void predict_into(const float* x, int64_t n, float* out);

  // The memory one replica's training step holds for a global batch of `batch` samples, as planned
  // (before training, without allocating). Throws Misuse before compile, InvalidArgument for batch < 1.
  TrainingMemory training_memory(int64_t batch) const;

  // Which CPU GEMM kernel this model's backend uses ("builtin avx512", "builtin avx2", "cblas (...)"; with a mixed
  // precision, the kernel of its 16-bit products too).
  std::string gemm_kernel() const;
  // The dynamic loss scale the next MixedFloat16 step multiplies the loss by; 1 for other precisions.
  // Throws Misuse before compile.
  double loss_scale() const;

  class Impl;

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kx
