// ReLU, as keras.layers.ReLU: max_value (ReLU6 is max_value 6), negative_slope and threshold as
// keras.activations.relu computes them (activation_math.hpp's relu_general). With Keras's defaults it
// is the plain ReLU, which a loss may fold and whose gradient reads the output. Its settings live in
// LayerSpec::config (the layer's Keras config), read by the factory.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct ReluSettings {
  std::optional<double> max_value;
  double negative_slope = 0;
  double threshold = 0;
  bool plain() const { return !max_value && negative_slope == 0 && threshold == 0; }
  // max_value as the kernels take it: +infinity for None.
  float cap() const { return max_value ? static_cast<float>(*max_value) : std::numeric_limits<float>::infinity(); }
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
  return s;
}

class ReluLayer final : public Layer {
 public:
  ReluLayer(const LayerSpec& spec, ReluSettings settings) : Layer(spec), settings_(settings) {
    // ReLU and ReLU6 (max_value 6 alone) are activations the layer before may apply.
    const bool relu6 = settings.max_value == 6.0 && settings.negative_slope == 0 && settings.threshold == 0;
    fusable_activation_ = settings.plain() ? Activation::Relu : relu6 ? Activation::Relu6 : Activation::None;
  }

  Shape build(const Shape& in) override {
    size_ = num_elements(in);
    return in;
  }
  Activation output_activation() const override { return settings_.plain() ? Activation::Relu : Activation::None; }
  // The plain ReLU of 16-bit values is one, and so is its gradient; so is the gradient without a
  // slope (dy or 0). A slope or a cap makes new values, which the plan rounds.
  bool rounds_output(bool) const override { return settings_.plain(); }
  bool rounds_input_grads(bool) const override { return settings_.negative_slope == 0; }

  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override {
    const int64_t n = c.rows * size_;
    if (!settings_.plain()) {
      c.be->relu_general_forward(n, slope(), settings_.cap(), threshold(), c.x, c.y);
      return;
    }
    c.be->copy(n, c.x, c.y);
    if (!c.fold_activation) c.be->activation_forward(Activation::Relu, c.rows, size_, c.y);
  }
  // The plain ReLU's gradient comes from y (y > 0 where x > 0); with a slope, a cap or a threshold
  // it comes from x (relu_general_backward), and y is not read.
  bool backward_reads_input() const override { return !settings_.plain(); }
  bool backward_reads_output() const override { return settings_.plain(); }
  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    if (!settings_.plain()) {
      c.be->relu_general_backward(c.rows * size_, slope(), settings_.cap(), threshold(), c.x, c.dy, c.dx);
      return;
    }
    const Activation act = c.fold_activation ? Activation::None : Activation::Relu;
    c.be->activation_backward(act, c.rows, size_, c.y, c.dy, c.dx);
  }

  // Relu, LeakyRelu, or Keras's steps: where(x > threshold, x, 0) (or Relu), the cap, minus
  // slope * Relu(threshold - x).
  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_prefers_nchw();
    const std::string x = e.input_as(0, nchw);
    const ReluSettings& s = settings_;
    if (s.plain()) {
      e.node("Relu", {x}, {name()});
    } else if (s.negative_slope != 0 && !s.max_value && s.threshold == 0) {
      e.node("LeakyRelu", {x}, {name()}, {io::OnnxAttribute::real("alpha", slope())});
    } else {
      // The steps as Keras takes them, into name()/positive, name()/capped, then name().
      using Step = OnnxLayerExport::FormulaStep;
      const bool slope_part = s.negative_slope != 0;
      const char* y = s.max_value || slope_part ? "positive" : "";
      std::vector<Step> steps;
      if (s.threshold != 0) {
        steps.push_back(Step::of("Greater", "x", "$", "above", "threshold", threshold()));
        steps.push_back(Step::of("Where", "above", "x", y, "zero", 0.0f, "$"));
      } else {
        steps.push_back(Step::of("Relu", "x", "", y));
      }
      if (s.max_value) {
        // min(y, cap) as cap - relu(cap - y): OpenCV 4.6 reads neither opset 13's Clip nor Min with a
        // constant. It is y to the rounding of cap - y.
        const char* capped = slope_part ? "capped" : "";
        steps.push_back(Step::of("Mul", y, "$", "negated", "minus_one", -1.0f));
        steps.push_back(Step::of("Add", "negated", "$", "room", "max_value", s.cap()));
        steps.push_back(Step::of("Relu", "room", "", "room_left"));
        steps.push_back(Step::of("Mul", "room_left", "$", "cut", "minus_one", -1.0f));
        steps.push_back(Step::of("Add", "cut", "$", capped, "max_value", s.cap()));
        y = capped;
      }
      if (slope_part) {
        steps.push_back(Step::of("Sub", "$", "x", "below", "threshold", threshold()));
        steps.push_back(Step::of("Relu", "below", "", "negative"));
        steps.push_back(Step::of("Mul", "$", "negative", "sloped", "negative_slope", slope()));
        steps.push_back(Step::of("Sub", y, "sloped", ""));
      }
      e.formula(steps, x, name());
    }
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("max_value", settings_.max_value ? json::Value(*settings_.max_value) : json::Value());
    config.set("negative_slope", settings_.negative_slope);
    config.set("threshold", settings_.threshold);
  }

 private:
  float slope() const { return static_cast<float>(settings_.negative_slope); }
  float threshold() const { return static_cast<float>(settings_.threshold); }
  ReluSettings settings_;
  int64_t size_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_relu_layer(const LayerSpec& spec) {
  return std::make_unique<ReluLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
