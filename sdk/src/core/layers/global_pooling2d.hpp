// What GlobalAveragePooling2D and GlobalMaxPooling2D share: one window the size of the sample,
// (h, w, c) -> (c) or (1, 1, c) with keepdims, Keras's config, and ONNX's Global*Pool (flattened
// without keepdims). Each subclass runs its own pooling kernels over that window.
#pragma once
#include <string>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {

class GlobalPooling2dLayer : public Layer {
 public:
  GlobalPooling2dLayer(const LayerSpec& spec, bool keepdims, const char* onnx_op)
      : Layer(spec), keepdims_(keepdims), onnx_op_(onnx_op) {}

  Shape build(const Shape& in) override {
    require(in.size() == 3, Status::InvalidArgument,
            std::string(class_name()) + " layer \"" + name() +
                "\" needs samples of shape (height, width, channels), gets " + to_string(in));
    g_.in_h = g_.k_h = g_.stride_h = in[0];
    g_.in_w = g_.k_w = g_.stride_w = in[1];
    g_.channels = in[2];
    g_.out_h = g_.out_w = 1;
    return keepdims_ ? Shape{1, 1, in[2]} : Shape{in[2]};
  }

  void export_onnx(OnnxLayerExport& e) const override {
    if (keepdims_) {
      e.node(onnx_op_, {e.input_nchw()}, {name()});
      e.output(name(), true);
      return;
    }
    e.node(onnx_op_, {e.input_nchw()}, {name() + "/pooled"});
    e.node("Flatten", {name() + "/pooled"}, {name()}, {io::OnnxAttribute::integer("axis", 1)});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("data_format", "channels_last");
    config.set("keepdims", keepdims_);
  }
  backend::Window2d g_;

 private:
  bool keepdims_;
  const char* onnx_op_;
};

}  // namespace kx::core
