// Rescaling, as keras.layers.Rescaling: y = x * scale + offset, each operation rounded as Keras's
// TensorFlow backend computes it (a preprocessing step: MobileNetV3's x / 127.5 - 1, EfficientNet's
// x / 255). scale and offset are each one number or, as Keras broadcasts them over the last axis, a list
// of one value per channel (EfficientNet's 1 / sqrt(stddev) per colour with ImageNet weights). Its
// settings live in LayerSpec::config (the layer's Keras config), read by the factory.
#include <cmath>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::BinaryOp;
using backend::BinaryShape;

// One number, or one per channel (a list, or Keras's serialised NumPy array of one axis).
std::vector<double> finite_numbers(const json::Value& v, const std::string& what) {
  const json::Value* list = &v;
  if (const json::Value* numpy = v.type() == json::Value::Type::Object ? v.find("config") : nullptr)
    list = &numpy->at("value", what);  // {"class_name": "__numpy__", "config": {"value": [...]}}
  std::vector<double> out;
  if (list->type() == json::Value::Type::Array) {
    for (const json::Value& e : list->as_array(what)) {
      require(e.type() == json::Value::Type::Number, Status::Unsupported,
              what + " must be a number or a list of numbers (one per channel), got " + v.dump());
      out.push_back(e.as_number(what));
    }
    require(!out.empty(), Status::InvalidArgument, what + " is an empty list");
  } else {
    require(list->type() == json::Value::Type::Number, Status::Unsupported,
            what + " must be a number or a list of numbers (one per channel), got " + v.dump());
    out.push_back(list->as_number(what));
  }
  for (double d : out) require(std::isfinite(d), Status::InvalidArgument, what + " must be finite, got " + v.dump());
  return out;
}

struct RescalingSettings {
  std::vector<double> scale{1.0}, offset{0.0};
  bool scalar() const { return scale.size() == 1 && offset.size() == 1; }
};

RescalingSettings read_settings(const LayerSpec& spec) {
  const std::string what = "Rescaling \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (scale at least)");
  const json::Value config = json::parse(spec.config);
  RescalingSettings s;
  s.scale = finite_numbers(config.at("scale", what), what + " scale");
  if (const json::Value* v = config.find("offset")) s.offset = finite_numbers(*v, what + " offset");
  return s;
}

json::Value keras_value(const std::vector<double>& v) {
  if (v.size() == 1) return json::Value(v.front());
  json::Value::Array a;
  for (double d : v) a.emplace_back(d);
  return json::Value(std::move(a));
}

class RescalingLayer final : public Layer {
 public:
  RescalingLayer(const LayerSpec& spec, RescalingSettings s) : Layer(spec), s_(std::move(s)) {}

  Shape build(const Shape& in) override {
    size_ = checked_elements(in, "Rescaling layer \"" + name() + "\"'s sample");
    channels_ = in.empty() ? 1 : in.back();
    for (const auto* v : {&s_.scale, &s_.offset})
      require(v->size() == 1 || static_cast<int64_t>(v->size()) == channels_, Status::InvalidArgument,
              "Rescaling layer \"" + name() + "\" has " + std::to_string(v->size()) +
                  " values for samples of shape " + to_string(in) + ": one, or one per channel (" +
                  std::to_string(channels_) + ")");
    return in;
  }
  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  // Per channel: the scales and offsets, written by forward for backward (the step has no other place
  // for a layer's constants in the backend's memory).
  int64_t scratch_floats(int64_t) const override { return s_.scalar() ? 0 : 2 * channels_; }
  // x * scale, before the offset is added.
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return s_.scalar() ? 0 : checked_product({rows, size_}, "Rescaling layer \"" + name() + "\"'s workspace");
  }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

  void forward(const LayerContext& c) const override {
    if (s_.scalar()) return c.be->scale_shift(c.rows * size_, value(s_.scale, 0), value(s_.offset, 0), c.x, c.y);
    // The constants: zeros, then 0 * 0 + value, exact. Keras casts them to the compute type first.
    float* scale = c.scratch;
    float* offset = c.scratch + channels_;
    c.be->fill_zero(static_cast<size_t>(2 * channels_) * sizeof(float), c.scratch);
    for (int64_t k = 0; k < channels_; ++k) {
      c.be->scale_shift(1, 0.0f, value(s_.scale, k), scale + k, scale + k);
      c.be->scale_shift(1, 0.0f, value(s_.offset, k), offset + k, offset + k);
    }
    if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, 2 * channels_, c.scratch, c.scratch);
    c.be->binary_forward(per_channel(BinaryOp::Multiply, c.rows), 1, c.x, scale, c.workspace);
    if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, c.rows * size_, c.workspace, c.workspace);
    c.be->binary_forward(per_channel(BinaryOp::Add, c.rows), 1, c.workspace, offset, c.y);
  }
  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    if (s_.scalar()) return c.be->scale_shift(c.rows * size_, value(s_.scale, 0), 0.0f, c.dy, c.dx);
    c.be->binary_forward(per_channel(BinaryOp::Multiply, c.rows), 1, c.dy, c.scratch, c.dx);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    // Per channel, an image goes NCHW (OpenCV broadcasts [C, 1, 1] there, not [C] over NHWC).
    const bool nchw = s_.scalar() ? e.input_prefers_nchw() : e.input_is_image();
    const auto constant = [&](const char* what, const std::vector<double>& v) {
      std::vector<float> values;
      for (size_t k = 0; k < v.size(); ++k) values.push_back(value(v, static_cast<int64_t>(k)));
      const auto C = static_cast<int64_t>(v.size());
      // Per channel on an image (rank 3: nchw is set only for images then): [C, 1, 1].
      return nchw && C > 1 ? e.constant(what, {C, 1, 1}, std::move(values)) : e.constant(what, {C}, std::move(values));
    };
    e.node("Mul", {e.input_as(0, nchw), constant("scale", s_.scale)}, {name() + "/scaled"});
    e.node("Add", {name() + "/scaled", constant("offset", s_.offset)}, {name()});
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("scale", keras_value(s_.scale));
    config.set("offset", keras_value(s_.offset));
  }

 private:
  // Keras casts both to the compute type (float32) before it multiplies.
  static float value(const std::vector<double>& v, int64_t k) {
    return static_cast<float>(v[v.size() == 1 ? 0 : static_cast<size_t>(k)]);
  }
  // The whole batch as one operand [positions, channels] against constants [1, channels].
  BinaryShape per_channel(BinaryOp op, int64_t rows) const {
    BinaryShape s;
    s.op = op;
    s.rank = 2;
    s.dims[0] = s.a_dims[0] = rows * (size_ / channels_);
    s.dims[1] = s.a_dims[1] = s.b_dims[1] = channels_;
    s.b_dims[0] = 1;
    return s;
  }

  RescalingSettings s_;
  int64_t size_ = 0, channels_ = 1;
};

}  // namespace

std::unique_ptr<Layer> make_rescaling_layer(const LayerSpec& spec) {
  return std::make_unique<RescalingLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
