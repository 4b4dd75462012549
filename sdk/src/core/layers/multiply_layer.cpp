// Multiply (keras.layers.Multiply): the element-wise product of two inputs, with NumPy's broadcasting
// as Keras's merge layers have it, so that squeeze-and-excite's (N, 1, 1, C) scales (N, H, W, C).
#include "core/layers/broadcast_shape.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class MultiplyLayer final : public Layer {
 public:
  using Layer::Layer;

  Shape build(const Shape& in) override { return build_inputs({in}); }
  Shape build_inputs(const std::vector<Shape>& in) override {
    const std::string what = "Multiply layer \"" + name() + "\"";
    require(in.size() == 2, in.size() < 2 ? Status::InvalidArgument : Status::Unsupported,
            what + " multiplies 2 inputs, gets " + std::to_string(in.size()) +
                (in.size() > 2 ? " (more than 2 are not supported: chain Multiply layers)" : ""));
    shape_ = broadcast_shape(backend::BinaryOp::Multiply, in[0], in[1], what);
    return output_shape(shape_);
  }

  // Keras's Multiply replaces masked inputs' values by 1 and ORs the masks; kx does not yet.
  void take_input_masks(const std::vector<int>& sources) override { refuse_masks(sources, *this); }
  void forward(const LayerContext& c) const override { c.be->binary_forward(shape_, c.rows, c.xs[0], c.xs[1], c.y); }
  // Each input's gradient is dy times the other input.
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    for (int32_t k = 0; k < 2; ++k)
      if (c.dxs[k]) c.be->binary_backward(shape_, c.rows, k, c.xs[0], c.xs[1], c.dy, c.dxs[k]);
  }

  // ONNX's Mul broadcasts as NumPy does; both inputs in one layout keep their axes aligned.
  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_is_image(0) && e.input_is_image(1) && (e.input_prefers_nchw(0) || e.input_prefers_nchw(1));
    e.node("Mul", {e.input_as(0, nchw), e.input_as(1, nchw)}, {name()});
    e.output(name(), nchw);
  }

 private:
  backend::BinaryShape shape_;
};

}  // namespace

std::unique_ptr<Layer> make_multiply_layer(const LayerSpec& spec) { return std::make_unique<MultiplyLayer>(spec); }

}  // namespace kx::core
