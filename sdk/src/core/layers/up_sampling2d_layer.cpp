// UpSampling2D, as keras.layers.UpSampling2D: (h, w, c) -> (h * size_h, w * size_w, c), each pixel
// repeated ("nearest") or TensorFlow's half-pixel bilinear resize ("bilinear", what Keras 3 computes
// through tf.image.resize). Its settings live in LayerSpec::config.
#include <tuple>

#include "core/checked_size.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::Interpolation;

class UpSampling2dLayer final : public Layer {
 public:
  explicit UpSampling2dLayer(const LayerSpec& spec) : Layer(spec) {
    const std::string what = "UpSampling2D \"" + spec.name + "\"";
    const json::Value config = json::parse(spec.config.empty() ? "{}" : spec.config);
    u_.size_h = u_.size_w = 2;  // Keras's default
    if (const json::Value* v = config.find("size")) std::tie(u_.size_h, u_.size_w) = size_pair_from_json(*v, what + " size");
    if (const json::Value* v = config.find("interpolation")) {
      const std::string name = v->as_string(what + " interpolation");
      if (name == "nearest") u_.interpolation = Interpolation::Nearest;
      else if (name == "bilinear") u_.interpolation = Interpolation::Bilinear;
      else if (name == "bicubic" || name == "lanczos3" || name == "lanczos5")
        fail(Status::Unsupported, what + ": interpolation \"" + name + "\" is not supported (nearest or bilinear)");
      else fail(Status::InvalidArgument, what + ": unknown interpolation \"" + name + "\"");
    }
    if (const json::Value* v = config.find("data_format"); v && !v->is_null())
      require(v->as_string(what + " data_format") == "channels_last", Status::Unsupported,
              what + ": only data_format \"channels_last\" is supported");
    checked_dimension(u_.size_h, 1, what + " size along the height");
    checked_dimension(u_.size_w, 1, what + " size along the width");
  }

  Shape build(const Shape& in) override {
    const std::string what = "UpSampling2D layer \"" + name() + "\"";
    require(in.size() == 3, Status::InvalidArgument,
            what + " needs samples of shape (height, width, channels), gets " + to_string(in));
    u_.in_h = in[0];
    u_.in_w = in[1];
    u_.channels = in[2];
    const int64_t out_h = checked_product({in[0], u_.size_h}, what + "'s output height");
    const int64_t out_w = checked_product({in[1], u_.size_w}, what + "'s output width");
    checked_product({out_h, out_w, in[2]}, what + "'s output");
    return {out_h, out_w, in[2]};
  }

  bool backward_reads_input() const override { return false; }  // the weights depend on positions only
  bool backward_reads_output() const override { return false; }
  // Repeated 16-bit values are 16-bit values; interpolated ones are not.
  bool rounds_output(bool) const override { return u_.interpolation == Interpolation::Nearest; }

  void forward(const LayerContext& c) const override { c.be->upsample2d_forward(u_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->upsample2d_backward(u_, c.rows, c.dy, c.dx);
  }

  // ONNX's Resize by the factors: nearest as "asymmetric" with "floor" (a repeat), bilinear as "linear"
  // with "half_pixel" (TensorFlow's, the neighbours clamped to the input).
  void export_onnx(OnnxLayerExport& e) const override {
    const bool nearest = u_.interpolation == Interpolation::Nearest;
    const std::string scales = e.constant(
        "scales", {4}, {1.0f, 1.0f, static_cast<float>(u_.size_h), static_cast<float>(u_.size_w)});
    std::vector<io::OnnxAttribute> attributes{io::OnnxAttribute::text("mode", nearest ? "nearest" : "linear"),
                                              io::OnnxAttribute::text("coordinate_transformation_mode",
                                                                      nearest ? "asymmetric" : "half_pixel")};
    if (nearest) attributes.push_back(io::OnnxAttribute::text("nearest_mode", "floor"));
    e.node("Resize", {e.input_nchw(), "", scales}, {name()}, attributes);
    e.output(name(), true);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("size", json::Value::Array{json::Value(u_.size_h), json::Value(u_.size_w)});
    config.set("data_format", "channels_last");
    config.set("interpolation", u_.interpolation == Interpolation::Nearest ? "nearest" : "bilinear");
  }

 private:
  backend::Upsample2d u_;
};

}  // namespace

std::unique_ptr<Layer> make_up_sampling2d_layer(const LayerSpec& spec) { return std::make_unique<UpSampling2dLayer>(spec); }

}  // namespace kx::core
