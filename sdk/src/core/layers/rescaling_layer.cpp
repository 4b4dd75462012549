// Rescaling, as keras.layers.Rescaling: y = x * scale + offset, each operation rounded as Keras's
// TensorFlow backend computes it (a preprocessing step: MobileNetV3's x / 127.5 - 1, EfficientNet's
// x / 255). One scale and one offset for every value; per-channel lists are not supported. Its settings
// live in LayerSpec::config (the layer's Keras config), read by the factory.
#include <cmath>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct RescalingSettings {
  double scale = 1.0, offset = 0.0;
};

double finite_number(const json::Value& v, const std::string& what) {
  require(v.type() == json::Value::Type::Number, Status::Unsupported,
          what + " must be one number (per-channel scales and offsets are not supported), got " + v.dump());
  const double d = v.as_number(what);
  require(std::isfinite(d), Status::InvalidArgument, what + " must be finite, got " + v.dump());
  return d;
}

RescalingSettings read_settings(const LayerSpec& spec) {
  const std::string what = "Rescaling \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (scale at least)");
  const json::Value config = json::parse(spec.config);
  RescalingSettings s;
  s.scale = finite_number(config.at("scale", what), what + " scale");
  if (const json::Value* v = config.find("offset")) s.offset = finite_number(*v, what + " offset");
  return s;
}

class RescalingLayer final : public Layer {
 public:
  RescalingLayer(const LayerSpec& spec, RescalingSettings s) : Layer(spec), s_(s) {}

  Shape build(const Shape& in) override {
    size_ = checked_elements(in, "Rescaling layer \"" + name() + "\"'s sample");
    return in;
  }
  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override { c.be->scale_shift(c.rows * size_, scale(), offset(), c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->scale_shift(c.rows * size_, scale(), 0.0f, c.dy, c.dx);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_prefers_nchw();
    e.node("Mul", {e.input_as(0, nchw), e.constant("scale", {1}, {scale()})}, {name() + "/scaled"});
    e.node("Add", {name() + "/scaled", e.constant("offset", {1}, {offset()})}, {name()});
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("scale", s_.scale);
    config.set("offset", s_.offset);
  }

 private:
  // Keras casts both to the compute type (float32) before it multiplies.
  float scale() const { return static_cast<float>(s_.scale); }
  float offset() const { return static_cast<float>(s_.offset); }
  RescalingSettings s_;
  int64_t size_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_rescaling_layer(const LayerSpec& spec) {
  return std::make_unique<RescalingLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
