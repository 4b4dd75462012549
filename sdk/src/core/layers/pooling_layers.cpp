// Pooling over channels-last samples: MaxPooling2D and AveragePooling2D ("valid" windows, strides
// defaulting to the pool size as in Keras) and GlobalAveragePooling2D (the mean of each channel).
#include "core/checked_size.hpp"
#include "core/layers/global_pooling2d.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::Window2d;

class Pooling2dLayer : public Layer {
 public:
  using Layer::Layer;

  Shape build(const Shape& in) override {
    require(in.size() == 3, Status::InvalidArgument,
            std::string(class_name()) + " layer \"" + name() + "\" needs samples of shape (height, width, channels), gets " +
                to_string(in));
    require(in[0] >= spec_.pool_h && in[1] >= spec_.pool_w, Status::InvalidArgument,
            std::string(class_name()) + " layer \"" + name() + "\": pool " + std::to_string(spec_.pool_h) + "x" +
                std::to_string(spec_.pool_w) + " is larger than its input " + to_string(in));
    g_.in_h = in[0];
    g_.in_w = in[1];
    g_.channels = in[2];
    g_.k_h = spec_.pool_h;
    g_.k_w = spec_.pool_w;
    g_.stride_h = stride_h();
    g_.stride_w = stride_w();
    g_.out_h = (g_.in_h - g_.k_h) / g_.stride_h + 1;
    g_.out_w = (g_.in_w - g_.k_w) / g_.stride_w + 1;
    return {g_.out_h, g_.out_w, g_.channels};
  }

  void export_onnx(OnnxLayerExport& e) const override {
    e.node(spec_.kind == LayerKind::MaxPooling2D ? "MaxPool" : "AveragePool", {e.input_nchw()}, {name()},
           {io::OnnxAttribute::ints("kernel_shape", {spec_.pool_h, spec_.pool_w}),
            io::OnnxAttribute::ints("strides", {stride_h(), stride_w()})});
    e.output(name(), true);
  }

 protected:
  int64_t stride_h() const { return spec_.pool_stride_h > 0 ? spec_.pool_stride_h : spec_.pool_h; }
  int64_t stride_w() const { return spec_.pool_stride_w > 0 ? spec_.pool_stride_w : spec_.pool_w; }
  void add_config(json::Value& config) const override {
    config.set("pool_size", json::Value::Array{json::Value(spec_.pool_h), json::Value(spec_.pool_w)});
    config.set("strides", json::Value::Array{json::Value(stride_h()), json::Value(stride_w())});
    config.set("padding", "valid");
  }
  Window2d g_;
};

class MaxPooling2dLayer final : public Pooling2dLayer {
 public:
  using Pooling2dLayer::Pooling2dLayer;
  bool rounds_output(bool) const override { return true; }  // the maximum of 16-bit values is one
  // Windows that do not overlap route each gradient to one place: dx holds dy's values and zeros.
  bool rounds_input_grads(bool) const override { return g_.stride_h >= g_.k_h && g_.stride_w >= g_.k_w; }
  void forward(const LayerContext& c) const override { c.be->max_pool_forward(g_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->max_pool_backward(g_, c.rows, c.x, c.y, c.dy, c.dx);
  }
};

class AveragePooling2dLayer final : public Pooling2dLayer {
 public:
  using Pooling2dLayer::Pooling2dLayer;
  void forward(const LayerContext& c) const override { c.be->avg_pool_forward(g_, c.rows, c.x, c.y); }
  bool backward_reads_input() const override { return false; }  // dy spread over each window
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->avg_pool_backward(g_, c.rows, c.dy, c.dx);
  }
};

// One window over the whole (height, width) plane: [h, w, c] -> [c], or [1, 1, c] with keepdims
// (Keras's squeeze-and-excite blocks); the same values either way.
class GlobalAveragePooling2dLayer final : public GlobalPooling2dLayer {
 public:
  GlobalAveragePooling2dLayer(const LayerSpec& spec, bool keepdims)
      : GlobalPooling2dLayer(spec, keepdims, "GlobalAveragePool") {}
  void forward(const LayerContext& c) const override { c.be->avg_pool_forward(g_, c.rows, c.x, c.y); }
  bool backward_reads_input() const override { return false; }  // dy spread over each window
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->avg_pool_backward(g_, c.rows, c.dy, c.dx);
  }
};

void check_pool(const LayerSpec& spec, const char* what) {
  checked_dimension(spec.pool_h, 1, std::string(what) + " pool height");
  checked_dimension(spec.pool_w, 1, std::string(what) + " pool width");
  // 0: the pool size.
  checked_dimension(spec.pool_stride_h, 0, std::string(what) + " stride along the height");
  checked_dimension(spec.pool_stride_w, 0, std::string(what) + " stride along the width");
}

}  // namespace

// MaxPooling2D's and AveragePooling2D's settings (the kind is set already).
void read_pooling2d_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  const auto [ph, pw] = size_pair_from_json(config.at("pool_size", what), what + " pool_size");
  spec.pool_h = ph;
  spec.pool_w = pw;
  if (const json::Value* s = config.find("strides"); s && !s->is_null()) {
    const auto [sh, sw] = size_pair_from_json(*s, what + " strides");
    spec.pool_stride_h = sh;
    spec.pool_stride_w = sw;
  }
  if (const json::Value* p = config.find("padding"))
    require(padding_from_name(p->as_string(what + " padding"), what) == Padding::Valid, Status::Unsupported,
            what + ": only \"valid\" padding is supported for pooling");
}

// keepdims and data_format are read by the factory from LayerSpec::config.
void read_global_average_pooling2d_config(const json::Value&, const std::string&, LayerSpec&) {}

std::unique_ptr<Layer> make_max_pooling2d_layer(const LayerSpec& spec) {
  check_pool(spec, "MaxPooling2D");
  return std::make_unique<MaxPooling2dLayer>(spec);
}

std::unique_ptr<Layer> make_average_pooling2d_layer(const LayerSpec& spec) {
  check_pool(spec, "AveragePooling2D");
  return std::make_unique<AveragePooling2dLayer>(spec);
}

std::unique_ptr<Layer> make_global_average_pooling2d_layer(const LayerSpec& spec) {
  return std::make_unique<GlobalAveragePooling2dLayer>(spec, global_pooling_keepdims(spec, "GlobalAveragePooling2D"));
}

}  // namespace kx::core
