// Conv2D over channels-last samples: y = act(im2col(x) K + b), K [kh, kw, in_channels, filters]
// (Keras's kernel layout, which is im2col's patch order), Glorot-uniform K and zero b, as Keras; with
// use_bias false there is no b. dilation_rate (read from the layer's Keras config) spaces the taps,
// with strides 1 as Keras requires.
#include <algorithm>
#include <tuple>

#include "core/checked_size.hpp"
#include "core/layers/conv_axis.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_activation.hpp"
#include "core/layers/layer_json.hpp"
#include "core/layers/windowed_conv.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::Window2d;

// The taps' spacing along the height and the width.
struct Dilation {
  int64_t h = 1, w = 1;
};

class Conv2dLayer final : public Layer {
 public:
  Conv2dLayer(const LayerSpec& spec, Dilation dilation) : Layer(spec), dilation_(dilation), init_(spec) {
    writes_output_moments_ = true;
  }

  Shape build(const Shape& in) override {
    require(in.size() == 3, Status::InvalidArgument,
            "Conv2D layer \"" + name() + "\" needs samples of shape (height, width, channels), gets " + to_string(in));
    g_.in_h = in[0];
    g_.in_w = in[1];
    g_.channels = in[2];
    g_.k_h = spec_.kernel_h;
    g_.k_w = spec_.kernel_w;
    g_.stride_h = g_.stride_w = spec_.stride;
    g_.dilation_h = dilation_.h;
    g_.dilation_w = dilation_.w;
    const std::string what = "Conv2D layer \"" + name() + "\"";
    std::tie(g_.out_h, g_.pad_top) = conv_axis(g_.in_h, g_.k_h, g_.stride_h, g_.dilation_h, spec_.padding, what);
    std::tie(g_.out_w, g_.pad_left) = conv_axis(g_.in_w, g_.k_w, g_.stride_w, g_.dilation_w, spec_.padding, what);
    // What params(), the columns and the GEMMs multiply later.
    checked_product({g_.k_h, g_.k_w, g_.channels, spec_.filters}, "Conv2D layer \"" + name() + "\"'s kernel");
    checked_product({g_.out_h, g_.out_w, g_.k_h, g_.k_w, g_.channels}, "Conv2D layer \"" + name() + "\"'s columns");
    checked_product({g_.out_h, g_.out_w, spec_.filters}, "Conv2D layer \"" + name() + "\"'s output");
    conv_ = WindowedConv(g_, spec_.filters, spec_.use_bias, spec_.activation);
    return {g_.out_h, g_.out_w, spec_.filters};
  }

  std::vector<ParamSpec> params() const override {
    const int64_t field = g_.k_h * g_.k_w;
    std::vector<ParamSpec> p{{"kernel", {g_.k_h, g_.k_w, g_.channels, spec_.filters}, Init::GlorotUniform,
                              field * g_.channels, field * spec_.filters}};
    if (spec_.use_bias) p.push_back({"bias", {spec_.filters}, Init::Zeros, 0, 0});
    return init_.applied(std::move(p));
  }

  int64_t workspace_floats_on(const backend::Backend& be, int64_t rows) const override {
    return conv_.workspace_floats_on(be, rows, "Conv2D layer \"" + name() + "\"");
  }
  // The pre-activation values, for an activation whose gradient needs them.
  int64_t scratch_per_sample() const override {
    return keeps_linear_output(spec_.activation) ? g_.out_h * g_.out_w * spec_.filters : 0;
  }
  // x for the kernel's gradient; y only for the activation's (unless it reads the kept values).
  bool backward_reads_output() const override {
    return spec_.activation != Activation::None && !keeps_linear_output(spec_.activation);
  }
  Activation output_activation() const override { return spec_.activation; }
  bool rounds_output(bool fold) const override { return conv_.rounds_output(fold); }

  void forward(const LayerContext& c) const override { conv_.forward(c); }
  void backward(const LayerContext& c) const override { conv_.backward(c); }

  // Keras's kernel [kh, kw, in, filters] becomes ONNX's [filters, in, kh, kw]; "same" padding puts the
  // odd pixel at the bottom and right, as Keras (TensorFlow) does.
  void export_onnx(OnnxLayerExport& e) const override {
    const Shape& s = e.input_shape();
    const int64_t H = s[0], W = s[1], C = s[2], F = spec_.filters, kh = spec_.kernel_h, kw = spec_.kernel_w;
    const auto& w = e.weights();
    std::vector<float> kernel(w[0].size());
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < kw; ++b)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t f = 0; f < F; ++f)
            kernel[static_cast<size_t>(((f * C + c) * kh + a) * kw + b)] =
                w[0][static_cast<size_t>(((a * kw + b) * C + c) * F + f)];
    int64_t top = 0, left = 0, bottom = 0, right = 0;
    if (spec_.padding == Padding::Same) {
      const int64_t out_h = (H + spec_.stride - 1) / spec_.stride, out_w = (W + spec_.stride - 1) / spec_.stride;
      const int64_t span_h = (kh - 1) * dilation_.h + 1, span_w = (kw - 1) * dilation_.w + 1;
      const int64_t pad_h = std::max<int64_t>((out_h - 1) * spec_.stride + span_h - H, 0);
      const int64_t pad_w = std::max<int64_t>((out_w - 1) * spec_.stride + span_w - W, 0);
      top = pad_h / 2, bottom = pad_h - top, left = pad_w / 2, right = pad_w - left;
    }
    std::vector<std::string> inputs{e.input_nchw(), e.constant("kernel", {F, C, kh, kw}, std::move(kernel))};
    if (spec_.use_bias) inputs.push_back(e.constant("bias", {F}, w[1]));
    const std::string linear = spec_.activation == Activation::None ? name() : name() + "/linear";
    e.node("Conv", inputs, {linear},
           {io::OnnxAttribute::ints("kernel_shape", {kh, kw}),
            io::OnnxAttribute::ints("strides", {spec_.stride, spec_.stride}),
            io::OnnxAttribute::ints("dilations", {dilation_.h, dilation_.w}),
            io::OnnxAttribute::ints("pads", {top, left, bottom, right})});
    e.activation(spec_.activation, linear, name(), 1);
    e.output(name(), true);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("filters", spec_.filters);
    config.set("kernel_size", json::Value::Array{json::Value(spec_.kernel_h), json::Value(spec_.kernel_w)});
    config.set("strides", json::Value::Array{json::Value(spec_.stride), json::Value(spec_.stride)});
    config.set("padding", spec_.padding == Padding::Same ? "same" : "valid");
    config.set("dilation_rate", json::Value::Array{json::Value(dilation_.h), json::Value(dilation_.w)});
    config.set("activation", activation_name(spec_.activation));
    config.set("use_bias", spec_.use_bias);
    init_.add_to(config);
  }

 private:
  Dilation dilation_;
  KernelAndBiasInitializers init_;
  Window2d g_;
  WindowedConv conv_;
};

}  // namespace

void read_conv2d_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  spec.filters = config.at("filters", what).as_int(what + " filters");
  const auto [kh, kw] = size_pair_from_json(config.at("kernel_size", what), what + " kernel_size");
  spec.kernel_h = kh;
  spec.kernel_w = kw;
  if (const json::Value* s = config.find("strides")) {
    const auto [sh, sw] = size_pair_from_json(*s, what + " strides");
    require(sh == sw, Status::Unsupported, what + ": different strides along height and width are not supported");
    spec.stride = sh;
  }
  if (const json::Value* p = config.find("padding")) spec.padding = padding_from_name(p->as_string(what + " padding"), what);
  if (const json::Value* act = config.find("activation")) spec.activation = activation_from_json(*act, what + " activation");
  if (const json::Value* bias = config.find("use_bias")) spec.use_bias = bias->as_bool(what + " use_bias");
}

std::unique_ptr<Layer> make_conv2d_layer(const LayerSpec& spec) {
  checked_dimension(spec.filters, 1, "Conv2D filters");
  checked_dimension(spec.kernel_h, 1, "Conv2D kernel height");
  checked_dimension(spec.kernel_w, 1, "Conv2D kernel width");
  checked_dimension(spec.stride, 1, "Conv2D stride");
  require(spec.padding == Padding::Valid || spec.padding == Padding::Same, Status::InvalidArgument,
          "Conv2D padding must be valid or same");
  require(is_valid(spec.activation), Status::InvalidArgument,
          "unknown activation " + std::to_string(static_cast<int>(spec.activation)));
  Dilation dilation;
  if (!spec.config.empty()) {  // from a Keras config: its dilation_rate (the C++ and C builders have none)
    const std::string what = "Conv2D \"" + spec.name + "\"";
    const json::Value config = json::parse(spec.config);
    if (const json::Value* v = config.find("dilation_rate"))
      std::tie(dilation.h, dilation.w) = size_pair_from_json(*v, what + " dilation_rate");
    checked_dimension(dilation.h, 1, what + " dilation along the height");
    checked_dimension(dilation.w, 1, what + " dilation along the width");
    require_stride_or_dilation(spec.stride, spec.stride, dilation.h, dilation.w, what);
  }
  return std::make_unique<Conv2dLayer>(spec, dilation);
}

}  // namespace kx::core
