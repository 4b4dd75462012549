// The internal layer interface of the step plan. A layer reads its input and parameters and writes its
// output into buffers the plan allocated once; backward writes parameter and input gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "io/json.hpp"
#include "kx/layer.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

enum class Init { GlorotUniform, Zeros };

struct ParamSpec {
  std::string name;  // "kernel", "bias"
  Shape shape;
  Init init = Init::Zeros;
  int64_t fan_in = 0, fan_out = 0;
};

// Everything one call of forward or backward touches, for `rows` samples.
struct LayerContext {
  backend::Backend* be = nullptr;
  int64_t rows = 0;
  const float* x = nullptr;   // input  [rows, in]
  float* y = nullptr;         // output [rows, out]
  float* dy = nullptr;        // dL/dy; a layer may overwrite it
  float* dx = nullptr;        // dL/dx, or null when nothing before this layer needs it
  const float* w = nullptr;   // this layer's parameters (arena slice)
  float* dw = nullptr;        // this layer's gradients (same offsets in the gradient arena)
  float* scratch = nullptr;   // scratch_per_sample() * rows floats, kept from forward to backward
  bool training = false;
  // The output activation is folded into the loss (softmax + cross-entropy ...): forward leaves the
  // output as logits and backward receives dL/dlogits.
  bool fold_activation = false;
  uint64_t seed = 0;          // per step and layer, for dropout
  int64_t first_row = 0;      // of these rows in the global batch (a replica holds a slice of it)
};

class Layer {
 public:
  explicit Layer(LayerSpec spec) : spec_(std::move(spec)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const LayerSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  virtual const char* class_name() const = 0;

  // Checks the input shape (per sample) and returns the output shape; InvalidArgument if it does
  // not fit. Called once, when the layer is added.
  virtual Shape build(const Shape& input) = 0;
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual int64_t scratch_per_sample() const { return 0; }
  // The output is the input buffer itself (a reshape): forward and backward do nothing.
  virtual bool aliases_input() const { return false; }
  // The activation the loss may fold in (Dense's), else None.
  virtual Activation output_activation() const { return Activation::None; }

  virtual void forward(const LayerContext& c) const = 0;
  virtual void backward(const LayerContext& c) const = 0;

  // Keras-like {"class_name": ..., "config": {...}}.
  json::Value to_json() const;

 protected:
  virtual void add_config(json::Value& config) const { (void)config; }
  LayerSpec spec_;
};

std::unique_ptr<Layer> make_layer(const LayerSpec& spec);
// The LayerSpec of a {"class_name", "config"} object; InvalidArgument naming what is wrong.
LayerSpec layer_spec_from_json(const json::Value& v);

}  // namespace kx::core
