// Dropout (inverted): in training y = x * mask, mask = 0 or 1/(1-rate); the identity otherwise.
#include <cmath>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class DropoutLayer final : public Layer {
 public:
  using Layer::Layer;
  Shape build(const Shape& in) override {
    n_ = num_elements(in);
    return in;
  }
  int64_t scratch_per_sample() const override { return n_; }  // the mask

  void forward(const LayerContext& c) const override {
    if (c.training && spec_.rate > 0.0f)
      c.be->dropout_forward(spec_.rate, c.step_seed, c.seed_stream, c.first_row * n_, c.rows * n_, c.x, c.scratch, c.y);
    else
      c.be->copy(c.rows * n_, c.x, c.y);
  }

  // The mask (scratch) is all backward reads.
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    if (spec_.rate > 0.0f)
      c.be->multiply(c.rows * n_, c.dy, c.scratch, c.dx);
    else
      c.be->copy(c.rows * n_, c.dy, c.dx);
  }
  // The identity at inference: the layer's output is its input's value.
  void export_onnx(OnnxLayerExport& e) const override { e.output_is_input(); }

 protected:
  void add_config(json::Value& config) const override { config.set("rate", static_cast<double>(spec_.rate)); }

 private:
  int64_t n_ = 0;
};

}  // namespace

void read_dropout_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  spec.rate = static_cast<float>(config.at("rate", what).as_number(what + " rate"));
}

std::unique_ptr<Layer> make_dropout_layer(const LayerSpec& spec) {
  require(std::isfinite(spec.rate) && spec.rate >= 0.0f && spec.rate < 1.0f, Status::InvalidArgument,
          "Dropout rate must be in [0, 1) (got " + std::to_string(spec.rate) + ")");
  return std::make_unique<DropoutLayer>(spec);
}

}  // namespace kx::core
