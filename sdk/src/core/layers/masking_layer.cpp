// Masking, as keras.layers.Masking: a position (every axis but the last: a time step of [steps,
// features]) whose values all equal mask_value is masked, for the layers after it (an LSTM skips the
// step), and its output values are 0; the others pass unchanged. NaN differs from every mask_value, as
// in Keras. Like Keras's, it ignores a mask it receives and computes its own. Its settings live in
// LayerSpec::config (the layer's Keras config), read by the factory.
#include <string>
#include <vector>

#include "backend/rounding_math.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

double read_mask_value(const LayerSpec& spec) {
  if (spec.config.empty()) return 0.0;
  const json::Value config = json::parse(spec.config);
  const json::Value* v = config.find("mask_value");
  if (v == nullptr) return 0.0;
  const std::string what = "Masking \"" + spec.name + "\" mask_value";
  require(v->type() == json::Value::Type::Number, Status::Unsupported,
          what + " must be a number (kx takes no tensor there), got " + v->dump());
  return v->as_number(what);
}

class MaskingLayer final : public Layer {
 public:
  MaskingLayer(const LayerSpec& spec, double mask_value) : Layer(spec), mask_value_(mask_value) {}

  Shape build(const Shape& in) override {
    require(!in.empty(), Status::InvalidArgument,
            "Masking layer \"" + name() + "\" needs samples of rank >= 1 (positions of features), got " +
                to_string(in));
    const int64_t size = checked_elements(in, "Masking layer \"" + name() + "\"'s sample");
    features_ = in.back();
    positions_ = features_ == 0 ? 0 : size / features_;
    return in;
  }
  // The mask, one value per position, which backward reads too.
  int64_t scratch_per_sample() const override { return positions_; }
  bool computes_mask() const override { return true; }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }
  // It only passes values or writes zeros, in 16-bit types as in float32.
  bool rounds_output(bool) const override { return true; }
  bool rounds_input_grads(bool) const override { return true; }

  void forward(const LayerContext& c) const override {
    // Keras compares in the compute type: mask_value as a float16 or bfloat16 under mixed precision.
    const float v = backend::round_value(static_cast<float>(mask_value_), c.rounding);
    c.be->masking_forward(c.rows * positions_, features_, v, c.x, c.y, c.scratch);
  }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->masking_backward(c.rows * positions_, features_, c.scratch, c.dy, c.dx);
  }

  // x times the mask, as operations OpenCV 4.6 reads (its ReduceMax fails on a batch of unknown size):
  // the sum of |x - mask_value| over a position's features (a MatMul) is 0 exactly where it is masked
  // (an overflow makes it infinity, still > 0), and its Sign is then 0, else 1. A NaN makes the whole
  // position NaN (kx's layer keeps the position's other values).
  void export_onnx(OnnxLayerExport& e) const override {
    const int64_t F = features_;
    std::vector<int64_t> out_shape{-1};
    for (int64_t d : e.input_shape()) out_shape.push_back(d);
    const std::string p = name() + "/";
    e.node("Reshape", {e.input_plain(), e.constant_ints("rows", {2}, {-1, F})}, {p + "positions"});
    e.node("Add", {p + "positions", e.constant("minus_mask_value", {1}, {-static_cast<float>(mask_value_)})},
           {p + "offset"});
    e.node("Abs", {p + "offset"}, {p + "distance"});
    e.node("MatMul", {p + "distance", e.constant("sum", {F, 1}, std::vector<float>(static_cast<size_t>(F), 1.0f))},
           {p + "total"});
    e.node("Sign", {p + "total"}, {p + "mask"});
    e.node("MatMul", {p + "mask", e.constant("repeat", {1, F}, std::vector<float>(static_cast<size_t>(F), 1.0f))},
           {p + "mask_values"});
    e.node("Mul", {p + "positions", p + "mask_values"}, {p + "kept"});
    e.node("Reshape", {p + "kept", e.constant_ints("shape", {static_cast<int64_t>(out_shape.size())}, out_shape)},
           {name()});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override { config.set("mask_value", mask_value_); }

 private:
  double mask_value_ = 0.0;
  int64_t features_ = 0, positions_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_masking_layer(const LayerSpec& spec) {
  return std::make_unique<MaskingLayer>(spec, read_mask_value(spec));
}

}  // namespace kx::core
