// SeparableConv2D, as keras.layers.SeparableConv2D: a depthwise convolution (depthwise_kernel
// [kh, kw, channels, depth_multiplier], no bias) then a 1x1 convolution (pointwise_kernel
// [1, 1, channels * depth_multiplier, filters]) with the bias and activation. The depthwise part runs
// the backend's direct depthwise kernel, the pointwise part one GEMM; the depthwise output is kept from
// forward to backward (the pointwise kernel's gradient reads it). Settings in LayerSpec::config.
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

using backend::Epilogue;
using backend::Trans;

struct SeparableSettings {
  int64_t filters = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  Padding padding = Padding::Valid;
  int64_t multiplier = 1;
  bool use_bias = true;
  Activation activation = Activation::None;
};

SeparableSettings read_settings(const LayerSpec& spec) {
  const std::string what = "SeparableConv2D \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (filters and kernel_size)");
  const json::Value config = json::parse(spec.config);
  SeparableSettings s;
  s.filters = config.at("filters", what).as_int(what + " filters");
  std::tie(s.kernel_h, s.kernel_w) = size_pair_from_json(config.at("kernel_size", what), what + " kernel_size");
  if (const json::Value* v = config.find("strides"))
    std::tie(s.stride_h, s.stride_w) = size_pair_from_json(*v, what + " strides");
  if (const json::Value* v = config.find("dilation_rate"))
    std::tie(s.dilation_h, s.dilation_w) = size_pair_from_json(*v, what + " dilation_rate");
  if (const json::Value* v = config.find("padding")) s.padding = padding_from_name(v->as_string(what + " padding"), what);
  if (const json::Value* v = config.find("depth_multiplier")) s.multiplier = v->as_int(what + " depth_multiplier");
  if (const json::Value* v = config.find("use_bias")) s.use_bias = v->as_bool(what + " use_bias");
  if (const json::Value* v = config.find("activation")) s.activation = activation_from_json(*v, what + " activation");
  // Its activation is differentiated from the output: those whose gradient needs their input (swish,
  // gelu, ...) come as a layer of their own.
  if (keeps_linear_output(s.activation))
    throw Error(Status::Unsupported, what + ": activation \"" + activation_name(s.activation) +
                                         "\" inside SeparableConv2D is not supported; add Activation(\"" +
                                         activation_name(s.activation) + "\") after it");
  if (const json::Value* v = config.find("data_format"); v && !v->is_null())
    require(v->as_string(what + " data_format") == "channels_last", Status::Unsupported,
            what + ": only data_format \"channels_last\" is supported");
  checked_dimension(s.filters, 1, what + " filters");
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

class SeparableConv2dLayer final : public Layer {
 public:
  SeparableConv2dLayer(const LayerSpec& spec, SeparableSettings s)
      : Layer(spec), s_(s),
        init_(spec, {{"depthwise_initializer", "depthwise_kernel"}, {"pointwise_initializer", "pointwise_kernel"},
                     {"bias_initializer", "bias"}}) {}

  Shape build(const Shape& in) override {
    const std::string what = "SeparableConv2D layer \"" + name() + "\"";
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
    checked_product({g_.k_h, g_.k_w, g_.channels, s_.multiplier}, what + "'s depthwise kernel");
    checked_product({g_.channels, s_.multiplier, s_.filters}, what + "'s pointwise kernel");
    checked_product({g_.out_h, g_.out_w, g_.channels, s_.multiplier}, what + "'s depthwise output");
    checked_product({g_.out_h, g_.out_w, s_.filters}, what + "'s output");
    return {g_.out_h, g_.out_w, s_.filters};
  }

  // Keras's fans: receptive field times the last two axes of each kernel.
  std::vector<ParamSpec> params() const override {
    const int64_t field = g_.k_h * g_.k_w;
    std::vector<ParamSpec> p{
        {"depthwise_kernel", {g_.k_h, g_.k_w, g_.channels, s_.multiplier}, Init::GlorotUniform, field * g_.channels,
         field * s_.multiplier},
        {"pointwise_kernel", {1, 1, middle(), s_.filters}, Init::GlorotUniform, middle(), s_.filters}};
    if (s_.use_bias) p.push_back({"bias", {s_.filters}, Init::Zeros, 0, 0});
    return init_.applied(std::move(p));
  }
  // The depthwise output, for the pointwise kernel's gradient.
  int64_t scratch_per_sample() const override { return g_.out_h * g_.out_w * middle(); }
  // Its gradient, for the depthwise part's backward.
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return checked_product({rows, g_.out_h, g_.out_w, middle()}, "SeparableConv2D layer \"" + name() + "\"'s workspace");
  }
  bool backward_reads_output() const override { return s_.activation != Activation::None; }
  Activation output_activation() const override { return s_.activation; }
  bool rounds_output(bool fold) const override { return fold || piecewise_linear(s_.activation); }

  void forward(const LayerContext& c) const override {
    const int64_t positions = c.rows * g_.out_h * g_.out_w, M = middle(), F = s_.filters;
    c.be->depthwise_conv2d_forward(g_, s_.multiplier, c.rows, c.x, c.w, nullptr, c.scratch);
    // Keras's mixed precision holds the depthwise output in the 16-bit type.
    if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, positions * M, c.scratch, c.scratch);
    const Activation act = c.fold_activation ? Activation::None : s_.activation;
    const Activation fused = act == Activation::Relu ? Activation::Relu : Activation::None;
    Epilogue ep{bias(c.w), fused};
    ep.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::No, positions, F, M, c.scratch, M, pointwise(c.w), F, 0.0f, c.y, F, ep);
    if (act != fused) c.be->activation_forward(act, positions, F, c.y);
  }

  void backward(const LayerContext& c) const override {
    const int64_t positions = c.rows * g_.out_h * g_.out_w, M = middle(), F = s_.filters;
    if (!c.fold_activation && s_.activation != Activation::None) {
      c.be->activation_backward(s_.activation, positions, F, c.y, c.dy, c.dy);
      if (c.rounding != backend::Rounding::None && !piecewise_linear(s_.activation))
        c.be->round_to(c.rounding, positions * F, c.dy, c.dy);
    }
    if (c.dw) {
      Epilogue with_bias_grad;
      with_bias_grad.bias_grad = bias(c.dw);
      with_bias_grad.rounding = c.rounding;
      c.be->gemm(Trans::Yes, Trans::No, M, F, positions, c.scratch, M, c.dy, F, 0.0f, pointwise(c.dw), F,
                 with_bias_grad);
    }
    // The depthwise output's gradient (a 16-bit tensor in Keras's mixed precision, as its value).
    Epilogue ep;
    ep.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::Yes, positions, M, F, c.dy, F, pointwise(c.w), F, 0.0f, c.workspace, M, ep);
    c.be->depthwise_conv2d_backward(g_, s_.multiplier, c.rows, c.x, c.w, c.workspace, c.dx, c.dw);
    if (c.dw && c.rounding != backend::Rounding::None)
      c.be->round_to(c.rounding, g_.patch() * s_.multiplier, c.dw, c.dw);
  }

  // A grouped Conv (one group per input channel, no bias), then a 1x1 Conv with the bias.
  void export_onnx(OnnxLayerExport& e) const override {
    const int64_t kh = g_.k_h, kw = g_.k_w, M = middle(), F = s_.filters;
    const auto& w = e.weights();
    std::vector<float> depthwise(w[0].size()), pointwise_kernel(w[1].size());
    for (int64_t t = 0; t < kh * kw; ++t)
      for (int64_t o = 0; o < M; ++o)
        depthwise[static_cast<size_t>(o * kh * kw + t)] = w[0][static_cast<size_t>(t * M + o)];
    for (int64_t m = 0; m < M; ++m)
      for (int64_t f = 0; f < F; ++f)
        pointwise_kernel[static_cast<size_t>(f * M + m)] = w[1][static_cast<size_t>(m * F + f)];
    const int64_t span_h = (kh - 1) * g_.dilation_h + 1, span_w = (kw - 1) * g_.dilation_w + 1;
    const int64_t pad_h = std::max<int64_t>((g_.out_h - 1) * g_.stride_h + span_h - g_.in_h, 0);
    const int64_t pad_w = std::max<int64_t>((g_.out_w - 1) * g_.stride_w + span_w - g_.in_w, 0);
    const bool same = s_.padding == Padding::Same;
    const int64_t top = same ? pad_h / 2 : 0, left = same ? pad_w / 2 : 0;
    const int64_t bottom = same ? pad_h - top : 0, right = same ? pad_w - left : 0;
    e.node("Conv", {e.input_nchw(), e.constant("depthwise_kernel", {M, 1, kh, kw}, std::move(depthwise))},
           {name() + "/depthwise"},
           {io::OnnxAttribute::ints("kernel_shape", {kh, kw}), io::OnnxAttribute::integer("group", g_.channels),
            io::OnnxAttribute::ints("strides", {g_.stride_h, g_.stride_w}),
            io::OnnxAttribute::ints("dilations", {g_.dilation_h, g_.dilation_w}),
            io::OnnxAttribute::ints("pads", {top, left, bottom, right})});
    std::vector<std::string> inputs{name() + "/depthwise",
                                    e.constant("pointwise_kernel", {F, M, 1, 1}, std::move(pointwise_kernel))};
    if (s_.use_bias) inputs.push_back(e.constant("bias", {F}, w[2]));
    const std::string linear = s_.activation == Activation::None ? name() : name() + "/linear";
    e.node("Conv", inputs, {linear}, {io::OnnxAttribute::ints("kernel_shape", {1, 1})});
    e.activation(s_.activation, linear, name(), 1);
    e.output(name(), true);
  }

 protected:
  void add_config(json::Value& config) const override {
    using A = json::Value::Array;
    config.set("filters", s_.filters);
    config.set("kernel_size", A{json::Value(s_.kernel_h), json::Value(s_.kernel_w)});
    config.set("strides", A{json::Value(s_.stride_h), json::Value(s_.stride_w)});
    config.set("padding", s_.padding == Padding::Same ? "same" : "valid");
    config.set("data_format", "channels_last");
    config.set("dilation_rate", A{json::Value(s_.dilation_h), json::Value(s_.dilation_w)});
    config.set("depth_multiplier", s_.multiplier);
    config.set("activation", activation_name(s_.activation));
    config.set("use_bias", s_.use_bias);
    init_.add_to(config);
  }

 private:
  int64_t middle() const { return g_.channels * s_.multiplier; }
  // The pointwise kernel (or its gradient) and the bias after the depthwise kernel in a slice of
  // parameters; the bias is null without one.
  template <class T>
  T* pointwise(T* params) const {
    return params + g_.patch() * s_.multiplier;
  }
  template <class T>
  T* bias(T* params) const {
    return s_.use_bias ? pointwise(params) + middle() * s_.filters : nullptr;
  }
  SeparableSettings s_;
  KerasInitializers init_;
  backend::Window2d g_;
};

}  // namespace

std::unique_ptr<Layer> make_separable_conv2d_layer(const LayerSpec& spec) {
  return std::make_unique<SeparableConv2dLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
