// Conv2DTranspose, as keras.layers.Conv2DTranspose: the adjoint of a convolution, kernel
// [kh, kw, filters, channels] (Keras's layout), strides, dilation_rate, padding "valid" or "same" and
// output_padding, with TensorFlow's output size and padding. It is the convolution from its output
// back to its input run backwards: forward is that convolution's input gradient (a GEMM into columns,
// then col2im), backward its forward (im2col, then GEMMs). Settings in LayerSpec::config.
#include <algorithm>
#include <optional>
#include <tuple>

#include "core/checked_size.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_activation.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::Epilogue;
using backend::Trans;

struct TransposeSettings {
  int64_t filters = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  Padding padding = Padding::Valid;
  std::optional<std::pair<int64_t, int64_t>> output_padding;
  bool use_bias = true;
  Activation activation = Activation::None;
};

TransposeSettings read_settings(const LayerSpec& spec) {
  const std::string what = "Conv2DTranspose \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (filters and kernel_size)");
  const json::Value config = json::parse(spec.config);
  TransposeSettings s;
  s.filters = config.at("filters", what).as_int(what + " filters");
  std::tie(s.kernel_h, s.kernel_w) = size_pair_from_json(config.at("kernel_size", what), what + " kernel_size");
  if (const json::Value* v = config.find("strides"))
    std::tie(s.stride_h, s.stride_w) = size_pair_from_json(*v, what + " strides");
  if (const json::Value* v = config.find("dilation_rate"))
    std::tie(s.dilation_h, s.dilation_w) = size_pair_from_json(*v, what + " dilation_rate");
  if (const json::Value* v = config.find("padding")) s.padding = padding_from_name(v->as_string(what + " padding"), what);
  if (const json::Value* v = config.find("output_padding"); v && !v->is_null())
    s.output_padding = size_pair_from_json(*v, what + " output_padding");
  if (const json::Value* v = config.find("use_bias")) s.use_bias = v->as_bool(what + " use_bias");
  if (const json::Value* v = config.find("activation")) s.activation = activation_from_json(*v, what + " activation");
  // Its activation is differentiated from the output: those whose gradient needs their input (swish,
  // gelu, ...) come as a layer of their own.
  if (keeps_linear_output(s.activation))
    throw Error(Status::Unsupported, what + ": activation \"" + activation_name(s.activation) +
                                         "\" inside Conv2DTranspose is not supported; add Activation(\"" +
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
  require(std::max(s.stride_h, s.stride_w) == 1 || std::max(s.dilation_h, s.dilation_w) == 1,
          Status::InvalidArgument, what + ": strides > 1 are incompatible with dilation_rate > 1");
  if (s.output_padding) {
    checked_dimension(s.output_padding->first, 0, what + " output_padding");
    checked_dimension(s.output_padding->second, 0, what + " output_padding");
    // As Keras: each output padding below its stride.
    require(s.output_padding->first < s.stride_h && s.output_padding->second < s.stride_w, Status::InvalidArgument,
            what + ": output_padding must be lower than the strides");
  }
  return s;
}

// One axis: the output length as Keras computes it (keras/src/backend/common/backend_utils.py), and
// the padding of the convolution from that output back to the input as TensorFlow derives it. The
// convolution must give the input length again (TensorFlow refuses otherwise).
struct TransposeAxis {
  int64_t out = 0, pad = 0;
};
TransposeAxis transpose_axis(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding padding,
                             std::optional<int64_t> output_padding, const std::string& what) {
  const int64_t span = checked_product({k - 1, dilation}, what + "'s dilated kernel") + 1;
  const int64_t before = checked_product({in - 1, stride}, what + "'s output");
  TransposeAxis a;
  if (padding == Padding::Valid) {
    a.out = before + span + output_padding.value_or(std::max(span, stride) - span);
  } else {
    a.out = output_padding ? before + span % 2 + *output_padding : in * stride;
    a.pad = std::max<int64_t>((in - 1) * stride + span - a.out, 0) / 2;
  }
  checked_dimension(a.out, 1, what + "'s output");
  const int64_t back = padding == Padding::Same ? (a.out + stride - 1) / stride
                                                : (a.out >= span ? (a.out - span) / stride + 1 : 0);
  require(back == in, Status::InvalidArgument,
          what + ": output_padding gives an output of " + std::to_string(a.out) + " from which a convolution does " +
              "not give the input's " + std::to_string(in));
  return a;
}

class Conv2dTransposeLayer final : public Layer {
 public:
  Conv2dTransposeLayer(const LayerSpec& spec, TransposeSettings s) : Layer(spec), s_(s), init_(spec) {}

  // g_ is the convolution from this layer's output (its "input", [out_h, out_w, filters]) to this
  // layer's input (its "output", [in_h, in_w, channels]).
  Shape build(const Shape& in) override {
    const std::string what = "Conv2DTranspose layer \"" + name() + "\"";
    require(in.size() == 3, Status::InvalidArgument,
            what + " needs samples of shape (height, width, channels), gets " + to_string(in));
    channels_ = in[2];
    const auto op = [&](bool h) -> std::optional<int64_t> {
      if (!s_.output_padding) return std::nullopt;
      return h ? s_.output_padding->first : s_.output_padding->second;
    };
    const TransposeAxis rows = transpose_axis(in[0], s_.kernel_h, s_.stride_h, s_.dilation_h, s_.padding, op(true), what);
    const TransposeAxis cols = transpose_axis(in[1], s_.kernel_w, s_.stride_w, s_.dilation_w, s_.padding, op(false), what);
    g_.in_h = rows.out;
    g_.in_w = cols.out;
    g_.channels = s_.filters;
    g_.k_h = s_.kernel_h;
    g_.k_w = s_.kernel_w;
    g_.stride_h = s_.stride_h;
    g_.stride_w = s_.stride_w;
    g_.dilation_h = s_.dilation_h;
    g_.dilation_w = s_.dilation_w;
    g_.pad_top = rows.pad;
    g_.pad_left = cols.pad;
    g_.out_h = in[0];
    g_.out_w = in[1];
    checked_product({g_.k_h, g_.k_w, s_.filters, channels_}, what + "'s kernel");
    checked_product({g_.out_h, g_.out_w, g_.patch()}, what + "'s columns");
    checked_product({g_.in_h, g_.in_w, s_.filters}, what + "'s output");
    return {g_.in_h, g_.in_w, s_.filters};
  }

  // Keras's fans for a kernel (kh, kw, filters, channels): the receptive field times its last two axes.
  std::vector<ParamSpec> params() const override {
    const int64_t field = g_.k_h * g_.k_w;
    std::vector<ParamSpec> p{{"kernel", {g_.k_h, g_.k_w, s_.filters, channels_}, Init::GlorotUniform,
                              field * s_.filters, field * channels_}};
    if (s_.use_bias) p.push_back({"bias", {s_.filters}, Init::Zeros, 0, 0});
    return init_.applied(std::move(p));
  }
  // The columns, one call at a time.
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return checked_product({rows, g_.out_h, g_.out_w, g_.patch()}, "Conv2DTranspose layer \"" + name() + "\"'s columns");
  }
  bool backward_reads_output() const override { return s_.activation != Activation::None; }
  Activation output_activation() const override { return s_.activation; }

  void forward(const LayerContext& c) const override {
    const int64_t inputs = c.rows * g_.out_h * g_.out_w, outputs = c.rows * g_.in_h * g_.in_w, F = s_.filters;
    Epilogue columns;
    columns.rounding = c.rounding;
    columns.keep_float32 = true;  // summed further by col2im
    c.be->gemm(Trans::No, Trans::Yes, inputs, g_.patch(), channels_, c.x, channels_, c.w, channels_, 0.0f, c.workspace,
               g_.patch(), columns);
    c.be->col2im(g_, c.rows, c.workspace, c.y);
    const bool rounded = c.rounding != backend::Rounding::None;
    if (s_.use_bias) {
      if (rounded) c.be->round_to(c.rounding, outputs * F, c.y, c.y);  // Keras adds the bias to 16-bit values
      c.be->bias_add(outputs, F, bias(c.w), c.y);
    }
    const Activation act = c.fold_activation ? Activation::None : s_.activation;
    if (act == Activation::None) return;
    if (rounded) c.be->round_to(c.rounding, outputs * F, c.y, c.y);
    c.be->activation_forward(act, outputs, F, c.y);
  }

  void backward(const LayerContext& c) const override {
    const int64_t inputs = c.rows * g_.out_h * g_.out_w, outputs = c.rows * g_.in_h * g_.in_w, F = s_.filters;
    const int64_t patch = g_.patch();
    if (!c.fold_activation && s_.activation != Activation::None) {
      c.be->activation_backward(s_.activation, outputs, F, c.y, c.dy, c.dy);
      if (c.rounding != backend::Rounding::None && !piecewise_linear(s_.activation))
        c.be->round_to(c.rounding, outputs * F, c.dy, c.dy);
    }
    if (!c.dw && !c.dx) return;
    c.be->im2col(g_, c.rows, c.dy, c.workspace);
    Epilogue ep;
    ep.rounding = c.rounding;
    if (c.dw) {
      c.be->gemm(Trans::Yes, Trans::No, patch, channels_, inputs, c.workspace, patch, c.x, channels_, 0.0f, c.dw,
                 channels_, ep);
      if (s_.use_bias) {
        c.be->bias_grad(outputs, F, c.dy, bias(c.dw));
        if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, F, bias(c.dw), bias(c.dw));
      }
    }
    if (c.dx)
      c.be->gemm(Trans::No, Trans::No, inputs, channels_, patch, c.workspace, patch, c.w, channels_, 0.0f, c.dx,
                 channels_, ep);
  }

  // ONNX's ConvTranspose: Keras's kernel [kh, kw, F, C] as [C, F, kh, kw]; the padding TensorFlow puts
  // before each axis, and what ONNX's full output has beyond Keras's taken off after it (or added as
  // output_padding where Keras's output is longer).
  void export_onnx(OnnxLayerExport& e) const override {
    const int64_t kh = g_.k_h, kw = g_.k_w, F = s_.filters, C = channels_;
    const auto& w = e.weights();
    std::vector<float> kernel(w[0].size());
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < kw; ++b)
        for (int64_t f = 0; f < F; ++f)
          for (int64_t ch = 0; ch < C; ++ch)
            kernel[static_cast<size_t>(((ch * F + f) * kh + a) * kw + b)] =
                w[0][static_cast<size_t>(((a * kw + b) * F + f) * C + ch)];
    const auto after = [](int64_t in, int64_t k, int64_t s, int64_t d, int64_t before, int64_t out) {
      const int64_t full = (in - 1) * s + (k - 1) * d + 1 - before;
      return std::pair<int64_t, int64_t>{std::max<int64_t>(full - out, 0), std::max<int64_t>(out - full, 0)};
    };
    const auto [bottom, extra_h] = after(g_.out_h, kh, g_.stride_h, g_.dilation_h, g_.pad_top, g_.in_h);
    const auto [right, extra_w] = after(g_.out_w, kw, g_.stride_w, g_.dilation_w, g_.pad_left, g_.in_w);
    std::vector<std::string> inputs{e.input_nchw(), e.constant("kernel", {C, F, kh, kw}, std::move(kernel))};
    if (s_.use_bias) inputs.push_back(e.constant("bias", {F}, w[1]));
    const std::string linear = s_.activation == Activation::None ? name() : name() + "/linear";
    e.node("ConvTranspose", inputs, {linear},
           {io::OnnxAttribute::ints("kernel_shape", {kh, kw}),
            io::OnnxAttribute::ints("strides", {g_.stride_h, g_.stride_w}),
            io::OnnxAttribute::ints("dilations", {g_.dilation_h, g_.dilation_w}),
            io::OnnxAttribute::ints("pads", {g_.pad_top, g_.pad_left, bottom, right}),
            io::OnnxAttribute::ints("output_padding", {extra_h, extra_w})});
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
    if (s_.output_padding)
      config.set("output_padding", A{json::Value(s_.output_padding->first), json::Value(s_.output_padding->second)});
    else
      config.set("output_padding", nullptr);
    config.set("data_format", "channels_last");
    config.set("dilation_rate", A{json::Value(s_.dilation_h), json::Value(s_.dilation_w)});
    config.set("activation", activation_name(s_.activation));
    config.set("use_bias", s_.use_bias);
    init_.add_to(config);
  }

 private:
  template <class T>
  T* bias(T* params) const {
    return s_.use_bias ? params + g_.patch() * channels_ : nullptr;
  }
  TransposeSettings s_;
  KernelAndBiasInitializers init_;
  backend::Window2d g_;
  int64_t channels_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_conv2d_transpose_layer(const LayerSpec& spec) {
  return std::make_unique<Conv2dTransposeLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
