// LayerNormalization, as keras.layers.LayerNormalization over the last axis: each position's features
// normalised by their own mean and (biased) variance, y = (x - mean) / sqrt(var + epsilon) * gamma +
// beta, with gamma (scale) and beta (center) of the last axis's size, in that order (Keras's weights).
// No batch statistics: training and inference compute the same. Its settings live in
// LayerSpec::config (the layer's Keras config), read by the factory.
#include <cmath>

#include "core/checked_size.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct LayerNormSettings {
  double epsilon = 1e-3;  // Keras's default
  bool center = true, scale = true;
};

LayerNormSettings read_settings(const LayerSpec& spec) {
  LayerNormSettings s;
  if (spec.config.empty()) return s;
  const json::Value config = json::parse(spec.config);
  const std::string what = "LayerNormalization \"" + spec.name + "\"";
  if (const json::Value* axis = config.find("axis")) {
    // An int, or a list of axes: only the last axis alone is supported.
    const json::Value* one = axis;
    if (axis->type() == json::Value::Type::Array) {
      const json::Value::Array& axes = axis->as_array(what + " axis");
      require(axes.size() == 1, Status::Unsupported,
              what + ": normalising over several axes (" + axis->dump() + ") is not supported, only the last");
      one = &axes.front();
    }
    require(one->as_int(what + " axis") == -1, Status::Unsupported,
            what + ": axis " + axis->dump() + " is not supported, only the last (-1)");
  }
  if (const json::Value* e = config.find("epsilon")) s.epsilon = e->as_number(what + " epsilon");
  require(std::isfinite(s.epsilon) && s.epsilon > 0, Status::InvalidArgument, what + " epsilon must be a positive number");
  if (const json::Value* c = config.find("center")) s.center = c->as_bool(what + " center");
  if (const json::Value* c = config.find("scale")) s.scale = c->as_bool(what + " scale");
  if (const json::Value* r = config.find("rms_scaling"))
    require(!r->as_bool(what + " rms_scaling"), Status::Unsupported, what + ": rms_scaling is not supported");
  return s;
}

class LayerNormalizationLayer final : public Layer {
 public:
  LayerNormalizationLayer(const LayerSpec& spec, LayerNormSettings settings)
      : Layer(spec), settings_(settings), init_(spec, {{"beta_initializer", "beta"}, {"gamma_initializer", "gamma"}}) {}

  Shape build(const Shape& in) override {
    require(!in.empty() && in.back() > 0, Status::InvalidArgument,
            "LayerNormalization layer \"" + name() + "\" needs samples with a last axis, got " + to_string(in));
    features_ = in.back();
    positions_ = num_elements(in) / features_;
    return in;
  }

  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p;
    if (settings_.scale) p.push_back({"gamma", {features_}, Init::Ones});
    if (settings_.center) p.push_back({"beta", {features_}, Init::Zeros});
    return init_.applied(std::move(p));
  }
  // Each position's mean and 1 / standard deviation, from forward to backward.
  int64_t scratch_per_sample() const override { return 2 * positions_; }
  bool backward_reads_output() const override { return false; }

  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override {
    const int64_t rows = c.rows * positions_;
    c.be->layer_norm_forward(rows, features_, c.x, eps(), gamma(c.w), beta(c.w), c.y, c.scratch, c.scratch + rows);
  }

  void backward(const LayerContext& c) const override {
    const int64_t rows = c.rows * positions_;
    float* dgamma = c.dw && settings_.scale ? c.dw : nullptr;
    float* dbeta = c.dw && settings_.center ? c.dw + (settings_.scale ? features_ : 0) : nullptr;
    c.be->layer_norm_backward(rows, features_, c.x, c.dy, c.scratch, c.scratch + rows, gamma(c.w), c.dx, dgamma, dbeta);
  }

  // Opset 13 has no LayerNormalization. Its steps as products with constant matrices over the last
  // axis, which every runtime reads (OpenCV 4.6 takes no ReduceMean over it): x (I - 1/F) centres each
  // position, (centred^2) (1/F) spreads its variance over the features, then divide, scale and shift.
  void export_onnx(OnnxLayerExport& e) const override {
    const std::string x = e.input_plain(), n = name();
    const auto F = static_cast<size_t>(features_);
    std::vector<float> centre(F * F), spread(F * F, 1.0f / static_cast<float>(F));
    for (size_t i = 0; i < F; ++i)
      for (size_t j = 0; j < F; ++j) centre[i * F + j] = (i == j ? 1.0f : 0.0f) - 1.0f / static_cast<float>(F);
    e.node("MatMul", {x, e.constant("centre", {features_, features_}, std::move(centre))}, {n + "/centered"});
    e.node("Mul", {n + "/centered", n + "/centered"}, {n + "/squared"});
    e.node("MatMul", {n + "/squared", e.constant("mean", {features_, features_}, std::move(spread))}, {n + "/variance"});
    e.node("Add", {n + "/variance", e.constant("epsilon", {1}, {eps()})}, {n + "/variance_eps"});
    e.node("Sqrt", {n + "/variance_eps"}, {n + "/std"});
    std::string y = n + "/normalized";
    e.node("Div", {n + "/centered", n + "/std"}, {settings_.scale || settings_.center ? y : n});
    const auto& w = e.weights();
    if (settings_.scale) {
      const std::string out = settings_.center ? n + "/scaled" : n;
      e.node("Mul", {y, e.constant("gamma", {features_}, w[0])}, {out});
      y = out;
    }
    if (settings_.center) e.node("Add", {y, e.constant("beta", {features_}, w[settings_.scale ? 1 : 0])}, {n});
    e.output(n, false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("axis", -1);
    config.set("epsilon", settings_.epsilon);
    config.set("center", settings_.center);
    config.set("scale", settings_.scale);
    config.set("rms_scaling", false);
    init_.add_to(config);
  }

 private:
  // Keras adds epsilon to the float32 variance: the float32 of the double setting.
  float eps() const { return static_cast<float>(settings_.epsilon); }
  const float* gamma(const float* w) const { return settings_.scale ? w : nullptr; }
  const float* beta(const float* w) const {
    return settings_.center ? w + (settings_.scale ? features_ : 0) : nullptr;
  }
  LayerNormSettings settings_;
  KerasInitializers init_;
  int64_t features_ = 0, positions_ = 1;
};

}  // namespace

std::unique_ptr<Layer> make_layer_normalization_layer(const LayerSpec& spec) {
  return std::make_unique<LayerNormalizationLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
