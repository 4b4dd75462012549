// DepthwiseConv2D, as keras.layers.DepthwiseConv2D: each input channel convolved with its own
// depth_multiplier filters, kernel [kh, kw, channels, depth_multiplier] (Keras's layout), output
// channel c * depth_multiplier + m, then bias and activation; dilation_rate spaces the taps (with
// strides 1, as Keras). The backend runs it directly (no im2col and GEMM: each output reads only its
// own channel). Its settings live in LayerSpec::config (the
// layer's Keras config), read by the factory.
#include <algorithm>
#include <tuple>

#include "core/checked_size.hpp"
#include "core/layers/conv_axis.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_activation.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct DepthwiseSettings {
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  Padding padding = Padding::Valid;
  int64_t multiplier = 1;
  bool use_bias = true;
  Activation activation = Activation::None;
};

DepthwiseSettings read_settings(const LayerSpec& spec) {
  const std::string what = "DepthwiseConv2D \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (kernel_size at least)");
  const json::Value config = json::parse(spec.config);
  DepthwiseSettings s;
  std::tie(s.kernel_h, s.kernel_w) = size_pair_from_json(config.at("kernel_size", what), what + " kernel_size");
  if (const json::Value* v = config.find("strides"))
    std::tie(s.stride_h, s.stride_w) = size_pair_from_json(*v, what + " strides");
  if (const json::Value* v = config.find("padding")) s.padding = padding_from_name(v->as_string(what + " padding"), what);
  if (const json::Value* v = config.find("depth_multiplier")) s.multiplier = v->as_int(what + " depth_multiplier");
  if (const json::Value* v = config.find("use_bias")) s.use_bias = v->as_bool(what + " use_bias");
  if (const json::Value* v = config.find("activation")) s.activation = activation_from_json(*v, what + " activation");
  if (const json::Value* v = config.find("dilation_rate"))
    std::tie(s.dilation_h, s.dilation_w) = size_pair_from_json(*v, what + " dilation_rate");
  if (const json::Value* v = config.find("data_format"); v && !v->is_null())
    require(v->as_string(what + " data_format") == "channels_last", Status::Unsupported,
            what + ": only data_format \"channels_last\" is supported");
  checked_dimension(s.kernel_h, 1, what + " kernel height");
  checked_dimension(s.kernel_w, 1, what + " kernel width");
  checked_dimension(s.stride_h, 1, what + " stride along the height");
  checked_dimension(s.stride_w, 1, what + " stride along the width");
  checked_dimension(s.dilation_h, 1, what + " dilation along the height");
  checked_dimension(s.dilation_w, 1, what + " dilation along the width");
  checked_dimension(s.multiplier, 1, what + " depth_multiplier");
  require_stride_or_dilation(s.stride_h, s.stride_w, s.dilation_h, s.dilation_w, what);
  return s;
}

class DepthwiseConv2dLayer final : public Layer {
 public:
  DepthwiseConv2dLayer(const LayerSpec& spec, DepthwiseSettings s)
      : Layer(spec), s_(s), init_(spec, "depthwise_initializer") {
    absorbs_input_padding_ = true;
    writes_output_moments_ = true;
  }

  Shape build(const Shape& in) override {
    const std::string what = "DepthwiseConv2D layer \"" + name() + "\"";
    require(in.size() == 3, Status::InvalidArgument,
            what + " needs samples of shape (height, width, channels), gets " + to_string(in));
    g_.in_h = in[0];
    g_.in_w = in[1];
    g_.channels = in[2];
    g_.k_h = s_.kernel_h;
    g_.k_w = s_.kernel_w;
    g_.stride_h = s_.stride_h;
    g_.stride_w = s_.stride_w;
    g_.dilation_h = s_.dilation_h;
    g_.dilation_w = s_.dilation_w;
    std::tie(g_.out_h, g_.pad_top) = conv_axis(g_.in_h, g_.k_h, g_.stride_h, g_.dilation_h, s_.padding, what);
    std::tie(g_.out_w, g_.pad_left) = conv_axis(g_.in_w, g_.k_w, g_.stride_w, g_.dilation_w, s_.padding, what);
    // What params() and the kernels multiply later.
    checked_product({g_.k_h, g_.k_w, g_.channels, s_.multiplier}, what + "'s kernel");
    checked_product({g_.out_h, g_.out_w, g_.channels, s_.multiplier}, what + "'s output");
    return {g_.out_h, g_.out_w, outputs()};
  }

  // Keras's fans for a kernel (kh, kw, channels, multiplier): the receptive field times its last two axes.
  std::vector<ParamSpec> params() const override {
    const int64_t field = g_.k_h * g_.k_w;
    std::vector<ParamSpec> p{{"kernel", {g_.k_h, g_.k_w, g_.channels, s_.multiplier}, Init::GlorotUniform,
                              field * g_.channels, field * s_.multiplier}};
    if (s_.use_bias) p.push_back({"bias", {outputs()}, Init::Zeros, 0, 0});
    return init_.applied(std::move(p));
  }
  Activation output_activation() const override { return s_.activation; }

  // The pre-activation values, for an activation whose gradient needs them.
  int64_t scratch_per_sample() const override { return keeps_linear_output(s_.activation) ? out_size() : 0; }
  // x and the weights for the gradients; y only for the activation's (unless it reads the kept values).
  bool backward_reads_output() const override {
    return s_.activation != Activation::None && !keeps_linear_output(s_.activation);
  }

  void forward(const LayerContext& c) const override {
    const Activation act = c.fold_activation ? Activation::None : s_.activation;
    float* z = linear_output(c, act);
    if (c.output_moments && act == Activation::None && c.rounding == backend::Rounding::None)
      return c.be->depthwise_conv2d_forward_moments(window(c), s_.multiplier, c.rows, c.x, c.w, bias(c.w), z,
                                                    c.output_moments, c.output_moments + outputs());
    c.be->depthwise_conv2d_forward(window(c), s_.multiplier, c.rows, c.x, c.w, bias(c.w), z);
    if (act != Activation::None) {
      if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, c.rows * out_size(), z, z);
      apply_activation(c, act, c.rows * g_.out_h * g_.out_w, outputs());
    }
    write_output_moments(c, c.rows * g_.out_h * g_.out_w, outputs());
  }

  void backward(const LayerContext& c) const override {
    const int64_t positions = c.rows * g_.out_h * g_.out_w;
    activation_gradient(c, s_.activation, positions, outputs());
    c.be->depthwise_conv2d_backward(window(c), s_.multiplier, c.rows, c.x, c.w, c.dy, c.dx, c.dw);
    if (!c.dw) return;
    if (s_.use_bias) c.be->bias_grad(positions, outputs(), c.dy, bias(c.dw));
    // Keras rounds each weight's gradient to the 16-bit type; the kernels sum in float32 and wider.
    if (c.rounding != backend::Rounding::None)
      c.be->round_to(c.rounding, g_.patch() * s_.multiplier + (s_.use_bias ? outputs() : 0), c.dw, c.dw);
  }

  // A grouped Conv, one group per input channel: Keras's kernel [kh, kw, C, M] becomes ONNX's
  // [C * M, 1, kh, kw]; "same" padding puts the odd pixel at the bottom and right, as Keras does.
  void export_onnx(OnnxLayerExport& e) const override {
    const int64_t kh = g_.k_h, kw = g_.k_w, O = outputs();
    const auto& w = e.weights();
    std::vector<float> kernel(w[0].size());
    for (int64_t t = 0; t < kh * kw; ++t)
      for (int64_t o = 0; o < O; ++o) kernel[static_cast<size_t>(o * kh * kw + t)] = w[0][static_cast<size_t>(t * O + o)];
    const int64_t span_h = (kh - 1) * g_.dilation_h + 1, span_w = (kw - 1) * g_.dilation_w + 1;
    const int64_t pad_h = std::max<int64_t>((g_.out_h - 1) * g_.stride_h + span_h - g_.in_h, 0);
    const int64_t pad_w = std::max<int64_t>((g_.out_w - 1) * g_.stride_w + span_w - g_.in_w, 0);
    const bool same = s_.padding == Padding::Same;
    const int64_t top = same ? pad_h / 2 : 0, left = same ? pad_w / 2 : 0;
    const int64_t bottom = same ? pad_h - top : 0, right = same ? pad_w - left : 0;
    std::vector<std::string> inputs{e.input_nchw(), e.constant("kernel", {O, 1, kh, kw}, std::move(kernel))};
    if (s_.use_bias) inputs.push_back(e.constant("bias", {O}, w[1]));
    const std::string linear = s_.activation == Activation::None ? name() : name() + "/linear";
    e.node("Conv", inputs, {linear},
           {io::OnnxAttribute::ints("kernel_shape", {kh, kw}), io::OnnxAttribute::integer("group", g_.channels),
            io::OnnxAttribute::ints("strides", {g_.stride_h, g_.stride_w}),
            io::OnnxAttribute::ints("dilations", {g_.dilation_h, g_.dilation_w}),
            io::OnnxAttribute::ints("pads", {top, left, bottom, right})});
    e.activation(s_.activation, linear, name(), 1);
    e.output(name(), true);
  }

 protected:
  void add_config(json::Value& config) const override {
    using A = json::Value::Array;
    config.set("kernel_size", A{json::Value(s_.kernel_h), json::Value(s_.kernel_w)});
    config.set("strides", A{json::Value(s_.stride_h), json::Value(s_.stride_w)});
    config.set("padding", s_.padding == Padding::Same ? "same" : "valid");
    config.set("depth_multiplier", s_.multiplier);
    config.set("data_format", "channels_last");
    config.set("dilation_rate", A{json::Value(s_.dilation_h), json::Value(s_.dilation_w)});
    config.set("activation", activation_name(s_.activation));
    config.set("use_bias", s_.use_bias);
    init_.add_to(config);
  }

 private:
  // The window over x: with an absorbed ZeroPadding2D (LayerContext::input_padding), x is its input,
  // and the zeros it would add lie before the window's first rows and columns (the offset) and past
  // its last ones (outside the input, which the kernels read as zeros).
  backend::Window2d window(const LayerContext& c) const {
    backend::Window2d g = g_;
    const Padding2d& p = c.input_padding;
    g.in_h -= p.top + p.bottom;
    g.in_w -= p.left + p.right;
    g.pad_top += p.top;
    g.pad_left += p.left;
    return g;
  }

  int64_t outputs() const { return g_.channels * s_.multiplier; }
  int64_t out_size() const { return g_.out_h * g_.out_w * outputs(); }
  // The bias (or its gradient) after the kernel in a slice of parameters; null without one.
  template <class T>
  T* bias(T* params) const {
    return s_.use_bias ? params + g_.patch() * s_.multiplier : nullptr;
  }
  DepthwiseSettings s_;
  KernelAndBiasInitializers init_;
  backend::Window2d g_;
};

}  // namespace

std::unique_ptr<Layer> make_depthwise_conv2d_layer(const LayerSpec& spec) {
  return std::make_unique<DepthwiseConv2dLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
