// LeakyReLU, as keras.layers.LeakyReLU: y = x for x > 0, negative_slope * x below (Keras 3's default
// slope 0.3; Keras 2 files call it alpha). The ReLU kernels with a slope compute it
// (activation_math.hpp's relu_general). Its setting lives in LayerSpec::config, read by the factory.
#include <cmath>
#include <limits>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

double read_slope(const LayerSpec& spec) {
  double slope = 0.3;
  if (spec.config.empty()) return slope;
  const json::Value config = json::parse(spec.config);
  const std::string what = "LeakyReLU \"" + spec.name + "\" negative_slope";
  const json::Value* v = config.find("negative_slope");
  if (!v) v = config.find("alpha");
  if (v) slope = v->as_number(what);
  require(std::isfinite(slope) && slope >= 0, Status::InvalidArgument, what + " must be a number >= 0");
  return slope;
}

class LeakyReluLayer final : public Layer {
 public:
  LeakyReluLayer(const LayerSpec& spec, double slope) : Layer(spec), slope_(slope) {}

  Shape build(const Shape& in) override {
    size_ = num_elements(in);
    return in;
  }
  // slope * x is a new value, which the plan rounds; the gradient (dy or slope * dy) too.
  bool rounds_output(bool) const override { return false; }
  bool rounds_input_grads(bool) const override { return false; }

  bool backward_reads_output() const override { return false; }  // the gradient comes from x

  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override {
    c.be->relu_general_forward(c.rows * size_, slope(), kNoCap, 0.0f, c.x, c.y);
  }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->relu_general_backward(c.rows * size_, slope(), kNoCap, 0.0f, c.x, c.dy, c.dx);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_prefers_nchw();
    e.node("LeakyRelu", {e.input_as(0, nchw)}, {name()}, {io::OnnxAttribute::real("alpha", slope())});
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override { config.set("negative_slope", slope_); }

 private:
  static constexpr float kNoCap = std::numeric_limits<float>::infinity();
  float slope() const { return static_cast<float>(slope_); }
  double slope_;
  int64_t size_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_leaky_relu_layer(const LayerSpec& spec) {
  return std::make_unique<LeakyReluLayer>(spec, read_slope(spec));
}

}  // namespace kx::core
