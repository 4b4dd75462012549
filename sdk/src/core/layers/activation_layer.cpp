// Activation: an activation function as a layer of its own (y = act(x)).
#include "core/layers/layer.hpp"
#include "core/layers/layer_activation.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class ActivationLayer final : public Layer {
 public:
  explicit ActivationLayer(const LayerSpec& spec) : Layer(spec) {
    if (fusable(spec.activation)) fusable_activation_ = spec.activation;
  }

  Shape build(const Shape& in) override {
    size_ = num_elements(in);
    cols_ = in.back();
    return in;
  }
  Activation output_activation() const override { return spec_.activation; }
  bool rounds_output(bool fold) const override { return fold || piecewise_linear(spec_.activation); }
  bool rounds_input_grads(bool fold) const override { return fold || piecewise_linear(spec_.activation); }

  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override {
    if (!c.fold_activation && keeps_linear_output(spec_.activation)) {
      c.be->pointwise_activation_forward(spec_.activation, c.rows * size_, c.x, c.y);
      return;
    }
    c.be->copy(c.rows * size_, c.x, c.y);
    if (!c.fold_activation) c.be->activation_forward(spec_.activation, c.rows * size_ / cols_, cols_, c.y);
  }
  // The gradient comes from y, or for swish, gelu ... from x.
  bool backward_reads_input() const override { return keeps_linear_output(spec_.activation); }
  bool backward_reads_output() const override { return !keeps_linear_output(spec_.activation); }
  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    const Activation act = c.fold_activation ? Activation::None : spec_.activation;
    if (keeps_linear_output(act))
      c.be->pointwise_activation_backward(act, c.rows * size_, c.x, c.dy, c.dx);
    else
      c.be->activation_backward(act, c.rows * size_ / cols_, cols_, c.y, c.dy, c.dx);
  }
  // "linear" returns its input's value: the layer's output is that value (as Dropout's).
  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_prefers_nchw();
    e.output(e.activation(spec_.activation, e.input_as(0, nchw), name(), nchw ? 1 : e.input_rank() - 1), nchw);
  }

 protected:
  void add_config(json::Value& config) const override { config.set("activation", activation_name(spec_.activation)); }

 private:
  int64_t size_ = 0, cols_ = 0;
};

}  // namespace

void read_activation_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  spec.activation = activation_from_json(config.at("activation", what), what + " activation");
}

std::unique_ptr<Layer> make_activation_layer(const LayerSpec& spec) {
  require(is_valid(spec.activation), Status::InvalidArgument,
          "unknown activation " + std::to_string(static_cast<int>(spec.activation)));
  return std::make_unique<ActivationLayer>(spec);
}

}  // namespace kx::core
