// ReLU, as keras.layers.ReLU: y = max(x, 0) with Keras's defaults (max_value None, negative_slope 0,
// threshold 0). Its settings live in LayerSpec::config (the layer's Keras config), read by the factory.
#include <cmath>
#include <optional>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct ReluSettings {
  std::optional<double> max_value;
  double negative_slope = 0;
  double threshold = 0;
};

// A setting that must be a number >= 0, as Keras requires of each.
double non_negative(const json::Value& v, const std::string& what) {
  const double d = v.as_number(what);
  require(std::isfinite(d) && d >= 0, Status::InvalidArgument, what + " must be a number >= 0, got " + v.dump());
  return d;
}

ReluSettings read_settings(const LayerSpec& spec) {
  ReluSettings s;
  if (spec.config.empty()) return s;
  const json::Value config = json::parse(spec.config);
  const std::string what = "ReLU \"" + spec.name + "\"";
  if (const json::Value* v = config.find("max_value"); v && !v->is_null())
    s.max_value = non_negative(*v, what + " max_value");
  if (const json::Value* v = config.find("negative_slope")) s.negative_slope = non_negative(*v, what + " negative_slope");
  if (const json::Value* v = config.find("threshold")) s.threshold = non_negative(*v, what + " threshold");
  require(!s.max_value && s.negative_slope == 0 && s.threshold == 0, Status::Unsupported,
          what + ": only Keras's defaults (max_value None, negative_slope 0, threshold 0) are supported");
  return s;
}

class ReluLayer final : public Layer {
 public:
  ReluLayer(const LayerSpec& spec, ReluSettings settings) : Layer(spec), settings_(settings) {}

  Shape build(const Shape& in) override {
    size_ = num_elements(in);
    return in;
  }
  Activation output_activation() const override { return Activation::Relu; }
  // The ReLU of 16-bit values is one, and so is its gradient.
  bool rounds_output(bool) const override { return true; }
  bool rounds_input_grads(bool) const override { return true; }

  void forward(const LayerContext& c) const override {
    c.be->copy(c.rows * size_, c.x, c.y);
    if (!c.fold_activation) c.be->activation_forward(Activation::Relu, c.rows, size_, c.y);
  }
  bool backward_reads_input() const override { return false; }  // y > 0 where x > 0
  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    const Activation act = c.fold_activation ? Activation::None : Activation::Relu;
    c.be->activation_backward(act, c.rows, size_, c.y, c.dy, c.dx);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_prefers_nchw();
    e.node("Relu", {e.input_as(0, nchw)}, {name()});
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("max_value", settings_.max_value ? json::Value(*settings_.max_value) : json::Value());
    config.set("negative_slope", settings_.negative_slope);
    config.set("threshold", settings_.threshold);
  }

 private:
  ReluSettings settings_;
  int64_t size_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_relu_layer(const LayerSpec& spec) {
  return std::make_unique<ReluLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
