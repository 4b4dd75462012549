// ZeroPadding2D: rows and columns of zeros around channels-last samples. The padded sample is im2col
// of a 1x1 window with the padding as the window's offset, and cropping the gradient is its adjoint.
#include "core/checked_size.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class ZeroPadding2dLayer final : public Layer {
 public:
  using Layer::Layer;

  Shape build(const Shape& in) override {
    require(in.size() == 3, Status::InvalidArgument,
            "ZeroPadding2D layer \"" + name() + "\" needs samples of shape (height, width, channels), gets " +
                to_string(in));
    g_.in_h = in[0];
    g_.in_w = in[1];
    g_.channels = in[2];
    g_.k_h = g_.k_w = g_.stride_h = g_.stride_w = 1;
    g_.pad_top = spec_.pad_top;
    g_.pad_left = spec_.pad_left;
    g_.out_h = in[0] + spec_.pad_top + spec_.pad_bottom;
    g_.out_w = in[1] + spec_.pad_left + spec_.pad_right;
    return {g_.out_h, g_.out_w, g_.channels};
  }

  // Values are only moved (and zeros added), both ways.
  bool rounds_output(bool) const override { return true; }
  bool rounds_input_grads(bool) const override { return true; }
  void forward(const LayerContext& c) const override { c.be->im2col(g_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->col2im(g_, c.rows, c.dy, c.dx);
  }
  void export_onnx(OnnxLayerExport& e) const override {
    const std::string pads = e.constant_ints(
        "pads", {8}, {0, 0, spec_.pad_top, spec_.pad_left, 0, 0, spec_.pad_bottom, spec_.pad_right});
    e.node("Pad", {e.input_nchw(), pads}, {name()});
    e.output(name(), true);
  }

 protected:
  void add_config(json::Value& config) const override {
    using A = json::Value::Array;
    config.set("padding", A{json::Value(A{json::Value(spec_.pad_top), json::Value(spec_.pad_bottom)}),
                            json::Value(A{json::Value(spec_.pad_left), json::Value(spec_.pad_right)})});
  }

 private:
  backend::Window2d g_;
};

}  // namespace

void read_zero_padding2d_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  // An int, (symmetric_h, symmetric_w) or ((top, bottom), (left, right)), as Keras; (1, 1) when absent,
  // Keras's default.
  const json::Value* given = config.find("padding");
  if (!given) {
    spec.pad_top = spec.pad_bottom = spec.pad_left = spec.pad_right = 1;
    return;
  }
  const json::Value& p = *given;
  if (p.type() == json::Value::Type::Number) {
    spec.pad_top = spec.pad_bottom = spec.pad_left = spec.pad_right = p.as_int(what + " padding");
    return;
  }
  const json::Value::Array& a = p.as_array(what + " padding");
  require(a.size() == 2, Status::InvalidArgument, what + " padding needs 2 entries");
  const auto [top, bottom] = size_pair_from_json(a[0], what + " padding");
  const auto [left, right] = size_pair_from_json(a[1], what + " padding");
  spec.pad_top = top;
  spec.pad_bottom = bottom;
  spec.pad_left = left;
  spec.pad_right = right;
}

std::unique_ptr<Layer> make_zero_padding2d_layer(const LayerSpec& spec) {
  checked_dimension(spec.pad_top, 0, "ZeroPadding2D padding at the top");
  checked_dimension(spec.pad_bottom, 0, "ZeroPadding2D padding at the bottom");
  checked_dimension(spec.pad_left, 0, "ZeroPadding2D padding on the left");
  checked_dimension(spec.pad_right, 0, "ZeroPadding2D padding on the right");
  return std::make_unique<ZeroPadding2dLayer>(spec);
}

}  // namespace kx::core
