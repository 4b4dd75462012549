// A model: a Sequential stack of layers, compiled into a static training-step plan.
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

struct CompileOptions {
  OptimizerConfig optimizer;
  LossConfig loss;
  bool accuracy = false;  // track the "accuracy" metric during fit
  uint64_t seed = 0;      // 0: a fixed default seed
};

struct FitOptions {
  int32_t epochs = 1;
  int32_t initial_epoch = 0;
  int64_t steps_per_epoch = 0;  // 0: one pass over the data
  Dataset* validation = nullptr;
  int64_t validation_steps = 0;  // 0: the whole validation set
  int32_t verbose = 0;           // 0 silent, 1 progress bar, 2 a line per epoch
  std::string resume_from;
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

class Model {
 public:
  static Model sequential(const Strategy& strategy, const Shape& input_shape);
  static Model from_json(const Strategy& strategy, const std::string& json);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  void add(LayerSpec spec);
  void add_dense(int64_t units, Activation act = Activation::None);
  // Conv2D over (height, width, channels) samples, as Keras: kernel [kh, kw, in, filters], same stride
  // both ways, "valid" or "same" padding.
  void add_conv2d(int64_t filters, int64_t kernel_h, int64_t kernel_w, int64_t stride = 1,
                  Padding padding = Padding::Valid, Activation act = Activation::None);
  // MaxPooling2D with strides equal to the pool size and "valid" padding (Keras's defaults).
  void add_max_pool2d(int64_t pool_h = 2, int64_t pool_w = 2);
  void add_flatten();
  void add_dropout(float rate);

  void compile(const CompileOptions& options);
  bool compiled() const;
  int64_t num_params() const;
  const Shape& input_shape() const;
  const Shape& output_shape() const;
  std::string to_json() const;

  std::vector<float> get_weights() const;
  void set_weights(const std::vector<float>& w);

  // One safetensors file with the config, compile settings, weights and optimizer state, written
  // durably (a crash leaves the old file or the new one). Throws Misuse before compile, Io.
  void save(const std::string& path) const;
  // A model saved by save() or a checkpoint, compiled as it was, on `strategy` (any replica count).
  // Throws Io, Corrupt (damaged or not a kx file).
  static Model load(const Strategy& strategy, const std::string& path);

  // Returns Status::Ok, or Status::Stopped when a callback stopped training.
  Status fit(Dataset& train, const FitOptions& options, const Callbacks* callbacks, History* history);
  EvalResult evaluate(const Dataset& data);
  // x: n samples of the input shape; returns n * numel(output_shape) floats.
  std::vector<float> predict(const float* x, int64_t n);
  // Same, into a caller buffer of at least n * numel(output_shape) floats.
  void predict_into(const float* x, int64_t n, float* out);

  // Which CPU GEMM kernel this model's backend uses ("avx512", "cblas", "portable").
  std::string gemm_kernel() const;

  class Impl;

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kx
