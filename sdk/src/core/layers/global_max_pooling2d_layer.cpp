// GlobalMaxPooling2D, as keras.layers.GlobalMaxPooling2D: the maximum of each channel over height and
// width, (h, w, c) -> (c), or (1, 1, c) with keepdims. Max pooling with one window the size of the
// sample, so the gradient goes to the first maximum as MaxPooling2D's does.
#include "core/layers/layer.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class GlobalMaxPooling2dLayer final : public Layer {
 public:
  GlobalMaxPooling2dLayer(const LayerSpec& spec, bool keepdims) : Layer(spec), keepdims_(keepdims) {}

  Shape build(const Shape& in) override {
    require(in.size() == 3, Status::InvalidArgument,
            "GlobalMaxPooling2D layer \"" + name() + "\" needs samples of shape (height, width, channels), gets " +
                to_string(in));
    g_.in_h = g_.k_h = g_.stride_h = in[0];
    g_.in_w = g_.k_w = g_.stride_w = in[1];
    g_.channels = in[2];
    g_.out_h = g_.out_w = 1;
    return keepdims_ ? Shape{1, 1, in[2]} : Shape{in[2]};
  }
  bool rounds_output(bool) const override { return true; }       // the maximum of 16-bit values is one
  bool rounds_input_grads(bool) const override { return true; }  // dy's values and zeros

  void forward(const LayerContext& c) const override { c.be->max_pool_forward(g_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->max_pool_backward(g_, c.rows, c.x, c.y, c.dy, c.dx);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    if (keepdims_) {
      e.node("GlobalMaxPool", {e.input_nchw()}, {name()});
      e.output(name(), true);
      return;
    }
    e.node("GlobalMaxPool", {e.input_nchw()}, {name() + "/pooled"});
    e.node("Flatten", {name() + "/pooled"}, {name()}, {io::OnnxAttribute::integer("axis", 1)});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("data_format", "channels_last");
    config.set("keepdims", keepdims_);
  }

 private:
  bool keepdims_;
  backend::Window2d g_;
};

}  // namespace

std::unique_ptr<Layer> make_global_max_pooling2d_layer(const LayerSpec& spec) {
  return std::make_unique<GlobalMaxPooling2dLayer>(spec, global_pooling_keepdims(spec, "GlobalMaxPooling2D"));
}

}  // namespace kx::core
