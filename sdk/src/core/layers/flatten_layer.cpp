// Flatten: each sample becomes rank 1. Row-major data is already flat, so the output is the input.
#include "core/layers/layer.hpp"

namespace kx::core {
namespace {

class FlattenLayer final : public Layer {
 public:
  using Layer::Layer;
  Shape build(const Shape& in) override { return {num_elements(in)}; }
  bool aliases_input() const override { return true; }
  bool backward_reads_input() const override { return false; }  // a view: it reads nothing
  bool backward_reads_output() const override { return false; }
  void forward(const LayerContext&) const override {}
  void backward(const LayerContext&) const override {}
  void export_onnx(OnnxLayerExport& e) const override {
    if (e.input_rank() == 2) return e.output_is_input();
    e.node("Flatten", {e.input_plain()}, {name()}, {io::OnnxAttribute::integer("axis", 1)});
    e.output(name(), false);
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten_layer(const LayerSpec& spec) { return std::make_unique<FlattenLayer>(spec); }

}  // namespace kx::core
