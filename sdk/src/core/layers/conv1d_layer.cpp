// Conv1D, as keras.layers.Conv1D: samples (steps, channels), kernel [kernel_size, channels, filters]
// (Keras's layout), strides, dilation_rate and padding "valid", "same" or "causal" (zeros on the left
// only, so that output t sees inputs up to t). A window one row high over the steps, run by the
// convolution Conv2D runs (windowed_conv.hpp). Its settings live in LayerSpec::config.
#include <algorithm>

#include "core/checked_size.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_activation.hpp"
#include "core/layers/layer_json.hpp"
#include "core/layers/windowed_conv.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

enum class Padding1d { Valid, Same, Causal };

struct Conv1dSettings {
  int64_t filters = 0, kernel = 0, stride = 1, dilation = 1;
  Padding1d padding = Padding1d::Valid;
  bool use_bias = true;
  Activation activation = Activation::None;
};

Conv1dSettings read_settings(const LayerSpec& spec) {
  const std::string what = "Conv1D \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (filters and kernel_size)");
  const json::Value config = json::parse(spec.config);
  Conv1dSettings s;
  s.filters = config.at("filters", what).as_int(what + " filters");
  s.kernel = size_from_json(config.at("kernel_size", what), what + " kernel_size");
  if (const json::Value* v = config.find("strides")) s.stride = size_from_json(*v, what + " strides");
  if (const json::Value* v = config.find("dilation_rate")) s.dilation = size_from_json(*v, what + " dilation_rate");
  if (const json::Value* v = config.find("padding")) {
    const std::string p = v->as_string(what + " padding");
    if (p == "valid") s.padding = Padding1d::Valid;
    else if (p == "same") s.padding = Padding1d::Same;
    else if (p == "causal") s.padding = Padding1d::Causal;
    else fail(Status::InvalidArgument, what + ": padding must be \"valid\", \"same\" or \"causal\", not \"" + p + "\"");
  }
  if (const json::Value* v = config.find("use_bias")) s.use_bias = v->as_bool(what + " use_bias");
  if (const json::Value* v = config.find("activation")) s.activation = activation_from_json(*v, what + " activation");
  if (const json::Value* v = config.find("groups")) {
    require(v->as_int(what + " groups") == 1, Status::Unsupported, what + ": groups other than 1 are not supported");
  }
  if (const json::Value* v = config.find("data_format"); v && !v->is_null())
    require(v->as_string(what + " data_format") == "channels_last", Status::Unsupported,
            what + ": only data_format \"channels_last\" is supported");
  checked_dimension(s.filters, 1, what + " filters");
  checked_dimension(s.kernel, 1, what + " kernel_size");
  checked_dimension(s.stride, 1, what + " strides");
  checked_dimension(s.dilation, 1, what + " dilation_rate");
  // As Keras: a strided convolution cannot be dilated.
  require(s.stride == 1 || s.dilation == 1, Status::InvalidArgument,
          what + ": strides > 1 are incompatible with dilation_rate > 1");
  return s;
}

class Conv1dLayer final : public Layer {
 public:
  Conv1dLayer(const LayerSpec& spec, Conv1dSettings s) : Layer(spec), s_(s), init_(spec) {}

  Shape build(const Shape& in) override {
    const std::string what = "Conv1D layer \"" + name() + "\"";
    require(in.size() == 2, Status::InvalidArgument,
            what + " needs samples of shape (steps, channels), gets " + to_string(in));
    backend::Window2d g;
    g.in_h = g.k_h = g.out_h = 1;
    g.in_w = in[0];
    g.channels = in[1];
    g.k_w = s_.kernel;
    g.stride_w = s_.stride;
    g.dilation_w = s_.dilation;
    const int64_t span = checked_product({s_.kernel - 1, s_.dilation}, what + "'s dilated kernel") + 1;
    switch (s_.padding) {
      case Padding1d::Valid:
        require(g.in_w >= span, Status::InvalidArgument,
                what + ": kernel spanning " + std::to_string(span) + " steps is longer than its input " + to_string(in) +
                    " with \"valid\" padding");
        g.out_w = (g.in_w - span) / s_.stride + 1;
        break;
      case Padding1d::Same:
        g.out_w = (g.in_w + s_.stride - 1) / s_.stride;
        g.pad_left = std::max<int64_t>((g.out_w - 1) * s_.stride + span - g.in_w, 0) / 2;
        break;
      case Padding1d::Causal:
        g.pad_left = span - 1;
        g.out_w = (g.in_w - 1) / s_.stride + 1;
        break;
    }
    checked_product({s_.kernel, g.channels, s_.filters}, what + "'s kernel");
    checked_product({g.out_w, s_.kernel, g.channels}, what + "'s columns");
    checked_product({g.out_w, s_.filters}, what + "'s output");
    conv_ = WindowedConv(g, s_.filters, s_.use_bias, s_.activation);
    return {g.out_w, s_.filters};
  }

  // Keras's fans for a kernel (k, in, filters): the receptive field times its last two axes.
  std::vector<ParamSpec> params() const override {
    const int64_t C = conv_.window().channels;
    std::vector<ParamSpec> p{
        {"kernel", {s_.kernel, C, s_.filters}, Init::GlorotUniform, s_.kernel * C, s_.kernel * s_.filters}};
    if (s_.use_bias) p.push_back({"bias", {s_.filters}, Init::Zeros, 0, 0});
    return init_.applied(std::move(p));
  }

  int64_t workspace_floats_on(const backend::Backend& be, int64_t rows) const override {
    return conv_.workspace_floats_on(be, rows, "Conv1D layer \"" + name() + "\"");
  }
  // The pre-activation values, for an activation whose gradient needs them.
  int64_t scratch_per_sample() const override {
    const backend::Window2d& g = conv_.window();
    return keeps_linear_output(s_.activation) ? g.out_h * g.out_w * s_.filters : 0;
  }
  // x for the kernel's gradient; y only for the activation's (unless it reads the kept values).
  bool backward_reads_output() const override {
    return s_.activation != Activation::None && !keeps_linear_output(s_.activation);
  }
  Activation output_activation() const override { return s_.activation; }
  bool rounds_output(bool fold) const override { return conv_.rounds_output(fold); }

  void forward(const LayerContext& c) const override { conv_.forward(c); }
  void backward(const LayerContext& c) const override { conv_.backward(c); }

  // ONNX's 1-D Conv over [N, C, L]: the input transposed from (N, steps, C), Keras's kernel [k, C, F]
  // as [F, C, k], the causal or odd "same" padding on the right as Keras puts it, and back.
  void export_onnx(OnnxLayerExport& e) const override {
    const backend::Window2d& g = conv_.window();
    const int64_t C = g.channels, F = s_.filters, k = s_.kernel;
    const auto& w = e.weights();
    std::vector<float> kernel(w[0].size());
    for (int64_t t = 0; t < k; ++t)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t f = 0; f < F; ++f)
          kernel[static_cast<size_t>((f * C + c) * k + t)] = w[0][static_cast<size_t>((t * C + c) * F + f)];
    const int64_t span = (k - 1) * s_.dilation + 1;
    const int64_t total = std::max<int64_t>((g.out_w - 1) * s_.stride + span - g.in_w - g.pad_left, 0) + g.pad_left;
    const int64_t left = g.pad_left, right = total - left;
    std::string ncl = e.input_ncl();
    int64_t conv_left = left, conv_right = right;
    if (left != right) {  // a Pad node: OpenCV's 1-D Conv pads both sides by the first of its pads
      e.node("Pad", {ncl, e.constant_ints("pads", {6}, {0, 0, left, 0, 0, right})}, {name() + "/padded"});
      ncl = name() + "/padded";
      conv_left = conv_right = 0;
    }
    std::vector<std::string> inputs{ncl, e.constant("kernel", {F, C, k}, std::move(kernel))};
    if (s_.use_bias) inputs.push_back(e.constant("bias", {F}, w[1]));
    e.node("Conv", inputs, {name() + "/conv"},
           {io::OnnxAttribute::ints("kernel_shape", {k}), io::OnnxAttribute::ints("strides", {s_.stride}),
            io::OnnxAttribute::ints("dilations", {s_.dilation}),
            io::OnnxAttribute::ints("pads", {conv_left, conv_right})});
    const std::string linear = s_.activation == Activation::None ? name() : name() + "/linear";
    e.node("Transpose", {name() + "/conv"}, {linear}, {io::OnnxAttribute::ints("perm", {0, 2, 1})});
    e.activation(s_.activation, linear, name(), 2);
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    using A = json::Value::Array;
    config.set("filters", s_.filters);
    config.set("kernel_size", A{json::Value(s_.kernel)});
    config.set("strides", A{json::Value(s_.stride)});
    config.set("padding", s_.padding == Padding1d::Valid ? "valid" : s_.padding == Padding1d::Same ? "same" : "causal");
    config.set("data_format", "channels_last");
    config.set("dilation_rate", A{json::Value(s_.dilation)});
    config.set("groups", int64_t{1});
    config.set("activation", activation_name(s_.activation));
    config.set("use_bias", s_.use_bias);
    init_.add_to(config);
  }

 private:
  Conv1dSettings s_;
  KernelAndBiasInitializers init_;
  WindowedConv conv_;
};

}  // namespace

std::unique_ptr<Layer> make_conv1d_layer(const LayerSpec& spec) {
  return std::make_unique<Conv1dLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
