// The internal layer interface of the step plan. A layer reads its input and parameters and writes its
// output into buffers the plan allocated once; backward writes parameter and input gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/checked_size.hpp"
#include "core/layers/onnx_layer_export.hpp"
#include "io/json.hpp"
#include "kx/layer.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

enum class Init { GlorotUniform, Zeros, Ones, Values };

struct ParamSpec {
  std::string name;  // "kernel", "bias"
  Shape shape;
  Init init = Init::Zeros;
  int64_t fan_in = 0, fan_out = 0;
  // False for state the optimizer does not train (batch normalisation's moving statistics): its
  // "gradient" is the step to subtract, written by the layer's backward.
  bool trainable = true;
  std::vector<float> values{};  // the initial values, for Init::Values
  // Where Keras 3's weight files keep it, under the layer's group: "" for vars/<its index>; a layer
  // made of sublayers names the sublayer's group (MultiHeadAttention's "query_dense/vars/0", an LSTM's
  // "cell/vars/0", a Bidirectional's "forward_layer/cell/vars/0").
  std::string keras_file_path{};
  // Keras's initializer from the layer's config (keras_initializer.hpp), as JSON; empty: `init`.
  std::string initializer{};
};

// Rows and columns of zeros around a sample (ZeroPadding2D's).
struct Padding2d {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};

// Everything one call of forward or backward touches, for `rows` samples.
struct LayerContext {
  backend::Backend* be = nullptr;
  int64_t rows = 0;
  const float* x = nullptr;   // input  [rows, in] (the first input of a layer with several)
  float* y = nullptr;         // output [rows, out]
  float* dy = nullptr;        // dL/dy; a layer may overwrite it
  float* dx = nullptr;        // dL/dx (overwritten), or null when nothing before this layer needs it
  // Every input and its gradient, for layers with several inputs (xs[0] == x, dxs[0] == dx).
  const float* const* xs = nullptr;
  float* const* dxs = nullptr;
  const float* w = nullptr;   // this layer's parameters (arena slice)
  // This layer's gradients (same offsets in the gradient arena); null when the layer is frozen
  // (trainable false): backward then computes only dx.
  float* dw = nullptr;
  float* scratch = nullptr;   // scratch_floats(rows) floats, kept from forward to backward
  // workspace_floats_on(rows) floats for this call alone: other buffers of the step reuse them
  // between calls, so forward's content is gone by backward.
  float* workspace = nullptr;
  // The share of the global batch these rows are (rows / global rows): what a replica's statistics
  // weigh when the replicas' moving averages are combined.
  float batch_share = 1.0f;
  bool training = false;
  // The output activation is folded into the loss (softmax + cross-entropy ...): forward leaves the
  // output as logits and backward receives dL/dlogits.
  bool fold_activation = false;
  // The activation of the layer after this one, which the step plan has this layer apply
  // (Network::fused_activation): forward writes act(output), backward receives dL/d(act's output).
  // None for most layers.
  Activation fused_activation = Activation::None;
  // The zero padding of the ZeroPadding2D layer before this one, which the step plan has this layer
  // add itself (Network::input_padding_of): x is that layer's input, unpadded, and dx its gradient.
  // Zero for most layers.
  Padding2d input_padding;
  // Moment sharing (Network::share_moments): where forward also writes its output's column moments,
  // mean then variance as column_moments computes them, for the BatchNormalization that alone reads
  // the output (its batch statistics); null for most layers and calls. moments_given tells that
  // BatchNormalization they are already in its scratch.
  float* output_moments = nullptr;
  bool moments_given = false;
  // Dropout draws from mix_seed(*step_seed, seed_stream): the step's seed, in the backend's memory,
  // and the layer's index.
  const uint64_t* step_seed = nullptr;
  uint64_t seed_stream = 0;
  int64_t first_row = 0;      // of these rows in the global batch (a replica holds a slice of it)
  // Mixed precision's 16-bit type (None in float32): x, y, dy, dx and w hold values of it (w where the
  // layer autocasts its weights); the layer's GEMMs round what they store to it.
  backend::Rounding rounding = backend::Rounding::None;
  // Keras's sequence mask of the input, [rows, steps]: 1 where a time step counts, 0 where it is
  // masked; null when the input has none (see Layer::computes_mask).
  const float* mask = nullptr;
  // The mask of every input (masks[0] == mask), for layers with several inputs; null entries for none.
  const float* const* masks = nullptr;
};

class Layer {
 public:
  explicit Layer(LayerSpec spec) : spec_(std::move(spec)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const LayerSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  // Keras's class name, from the layer table (layer_registry.hpp).
  const char* class_name() const;

  // Checks the input shape (per sample) and returns the output shape; InvalidArgument if it does
  // not fit. Called once, when the layer is added.
  virtual Shape build(const Shape& input) = 0;
  // The same for every input of the layer; layers with one input check there is one.
  virtual Shape build_inputs(const std::vector<Shape>& inputs);
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual int64_t scratch_per_sample() const { return 0; }
  // Scratch floats for `rows` samples; layers with per-layer state (statistics) add to the default.
  virtual int64_t scratch_floats(int64_t rows) const {
    return checked_product({scratch_per_sample(), rows}, "layer \"" + name() + "\"'s scratch");
  }
  // The same on a given backend (a convolution the backend runs natively needs no columns).
  virtual int64_t scratch_floats_on(const backend::Backend& be, int64_t rows) const {
    (void)be;
    return scratch_floats(rows);
  }
  // Floats a call of forward or backward needs for itself alone (a convolution's columns), shared
  // with buffers that are dead at that moment.
  virtual int64_t workspace_floats_on(const backend::Backend& be, int64_t rows) const {
    (void)be;
    (void)rows;
    return 0;
  }
  // Integer scalars Keras keeps after the layer's weights and kx does not (an adapted Normalization's
  // sample count): kx's Keras files write them as 0, so that Keras finds every variable it expects.
  virtual size_t keras_only_counters() const { return 0; }
  // Whether backward reads the layer's inputs (x, xs) and its output (y): the step plan keeps an
  // activation until its last reader, and reuses its memory after that.
  virtual bool backward_reads_input() const { return true; }
  virtual bool backward_reads_output() const { return true; }
  bool trainable() const { return spec_.trainable; }
  void set_trainable(bool t) { spec_.trainable = t; }
  // The output is the input buffer itself (a reshape): forward and backward do nothing.
  virtual bool aliases_input() const { return false; }
  // Keras's masks. A layer that computes_mask (Embedding with mask_zero) writes its output's mask,
  // [rows, steps], at the start of its scratch in forward; one that passes_mask gives its output the
  // mask of its input (an LSTM returning sequences); the plan hands each layer its input's mask
  // (LayerContext::mask). Layers that do neither end the mask, as Keras's layers without masking.
  virtual bool computes_mask() const { return false; }
  virtual bool passes_mask() const { return false; }
  // Which inputs carry a Keras mask, once, after build_inputs and before the scratch is sized: an entry
  // per input, the same number for the same mask, -1 for none. A layer whose Keras counterpart would
  // use a mask in a way kx does not throws Unsupported here; the others answer computes_mask and
  // passes_mask (and size their buffers) by it.
  virtual void take_input_masks(const std::vector<int>& sources) { (void)sources; }
  // The layer reads integer ids (Embedding): mixed precision leaves the model's input as it is for it,
  // as Keras casts only floating inputs to the compute type.
  virtual bool reads_integer_input() const { return false; }
  // The activation the loss may fold in (Dense's), else None.
  virtual Activation output_activation() const { return Activation::None; }
  // Activation fusion (Network::fuse_activations): whether the layer applies an activation to its
  // output when the plan asks it to (LayerContext::fused_activation), and the activation a layer is,
  // y = act(x) element by element as pointwise_activation computes it and as the layer before may
  // apply it (None for other layers). Set by those layers' constructors: data, not virtuals, which
  // would add an entry to every layer's table.
  bool applies_fused_activation() const { return applies_fused_activation_; }
  Activation fusable_activation() const { return fusable_activation_; }
  // Padding absorption (Network::absorb_paddings): whether the layer reads a ZeroPadding2D's input and
  // adds its zeros itself when the plan asks it to (LayerContext::input_padding).
  bool absorbs_input_padding() const { return absorbs_input_padding_; }
  // Moment sharing: whether forward writes its output's column moments when the plan asks it to
  // (LayerContext::output_moments).
  bool writes_output_moments() const { return writes_output_moments_; }
  // Whether backward may write dx over dy, one buffer for both (plan_step_arena gives them one block):
  // each value of dx comes from the values of dy and x at its own index alone. Writing over a gradient
  // just read spares the memory traffic of a third buffer.
  bool writes_input_grad_in_place() const { return writes_input_grad_in_place_; }

  // Mixed precision (the plan rounds every tensor between layers to the 16-bit type). Whether the
  // layer reads its weights as that type (Keras's autocast variables); batch normalisation computes
  // in float32 and reads them as they are.
  virtual bool autocasts_weights() const { return true; }
  // Whether forward stores its output already rounded (a GEMM's epilogue rounded it, or the layer only
  // moves values), so that the plan need not round it again.
  virtual bool rounds_output(bool fold_activation) const {
    (void)fold_activation;
    return false;
  }
  // The same for the gradients backward writes into dx.
  virtual bool rounds_input_grads(bool fold_activation) const {
    (void)fold_activation;
    return false;
  }

  virtual void forward(const LayerContext& c) const = 0;
  virtual void backward(const LayerContext& c) const = 0;

  // The layer as ONNX inference nodes (onnx_layer_export.hpp), or e.not_exportable(why): every layer
  // decides, so one without an ONNX decision does not compile (its factory cannot make it).
  virtual void export_onnx(OnnxLayerExport& e) const = 0;

  // Keras-like {"class_name": ..., "config": {...}}.
  json::Value to_json() const;
  // The call's keyword arguments Keras records in the inbound node (an object; empty for most layers).
  virtual json::Value call_kwargs() const { return json::Value(json::Value::Object{}); }
  // Whether Keras calls the layer with its inputs as separate arguments (attention(query, value)),
  // not as one list (Add()([a, b])).
  virtual bool inputs_as_arguments() const { return false; }

 protected:
  virtual void add_config(json::Value& config) const { (void)config; }
  LayerSpec spec_;
  bool applies_fused_activation_ = false;
  Activation fusable_activation_ = Activation::None;
  bool absorbs_input_padding_ = false;
  bool writes_output_moments_ = false;
  bool writes_input_grad_in_place_ = false;
};

// For a layer that writes its output's moments with no faster way at hand: column_moments of y
// [positions, cols] into c.output_moments, when the plan asks for them.
inline void write_output_moments(const LayerContext& c, int64_t positions, int64_t cols) {
  if (c.output_moments) c.be->column_moments(positions, cols, c.y, c.output_moments, c.output_moments + cols);
}

// None or ReLU: of 16-bit values they give 16-bit values (and so do their gradients), where sigmoid,
// tanh and softmax need rounding again.
inline bool piecewise_linear(Activation a) { return a == Activation::None || a == Activation::Relu; }

// The layer of spec.kind, through the layer table (layer_registry.hpp); unbuilt.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec);
// Unsupported unless spec.axis is the last axis of samples of shape `in` (-1, or in.size() counting
// the batch axis as Keras does).
void require_last_axis(const LayerSpec& spec, const Shape& in, const char* class_name);
// Unsupported, naming the layer, when any of its inputs carries a Keras mask (take_input_masks' sources):
// for layers whose Keras counterparts use masks in ways kx does not.
void refuse_masks(const std::vector<int>& sources, const Layer& layer);
// The LayerSpec of a {"class_name", "config"} object (Layer::to_json's inverse): the name and
// trainable here, the rest by the layer's reader in the table; InvalidArgument naming what is wrong.
LayerSpec layer_spec_from_json(const json::Value& v);

}  // namespace kx::core
