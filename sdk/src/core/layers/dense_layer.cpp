// Dense: y = act(x W + b), W [in, units] (Keras's kernel layout), Glorot-uniform W and zero b; with
// use_bias false there is no b (y = act(x W)). Samples of higher rank are transformed along their last
// axis, every position alike (Keras's Dense on a sequence [steps, features] -> [steps, units]).
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

class DenseLayer final : public Layer {
 public:
  explicit DenseLayer(const LayerSpec& spec) : Layer(spec), init_(spec) {}

  Shape build(const Shape& in) override {
    require(!in.empty() && in.back() > 0, Status::InvalidArgument,
            "Dense layer \"" + name() + "\" needs samples with a last axis but gets " + to_string(in));
    in_ = in.back();
    checked_product({in_, spec_.units}, "Dense layer \"" + name() + "\"'s kernel");
    positions_ = checked_product({num_elements(in) / in_, spec_.units}, "Dense layer \"" + name() + "\"'s output") /
                 spec_.units;
    Shape out = in;
    out.back() = spec_.units;
    return out;
  }

  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p{{"kernel", {in_, spec_.units}, Init::GlorotUniform, in_, spec_.units}};
    if (spec_.use_bias) p.push_back({"bias", {spec_.units}, Init::Zeros, 0, 0});
    return init_.applied(std::move(p));
  }

  Activation output_activation() const override { return spec_.activation; }
  // The GEMM rounds y (a ReLU of rounded values is rounded); another activation comes after it.
  bool rounds_output(bool fold) const override { return fold || piecewise_linear(spec_.activation); }
  bool rounds_input_grads(bool) const override { return true; }

  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override {
    const int64_t units = spec_.units, rows = c.rows * positions_;
    const Activation act = c.fold_activation ? Activation::None : spec_.activation;
    const float* kernel = c.w;
    const float* bias = spec_.use_bias ? c.w + in_ * units : nullptr;
    Epilogue ep{bias, act == Activation::Relu ? Activation::Relu : Activation::None};
    ep.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::No, rows, units, in_, c.x, in_, kernel, units, 0.0f, linear_output(c, act), units,
               ep);
    if (act != Activation::Relu) apply_activation(c, act, rows, units);
  }

  // The pre-activation values, for an activation whose gradient needs them.
  int64_t scratch_per_sample() const override {
    return keeps_linear_output(spec_.activation) ? positions_ * spec_.units : 0;
  }
  // x for the kernel's gradient; y only for the activation's (unless it reads the kept values).
  bool backward_reads_output() const override {
    return spec_.activation != Activation::None && !keeps_linear_output(spec_.activation);
  }
  void backward(const LayerContext& c) const override {
    const int64_t units = spec_.units, rows = c.rows * positions_;
    activation_gradient(c, spec_.activation, rows, units);
    if (c.dw) {
      float* dkernel = c.dw;
      Epilogue with_bias_grad;
      if (spec_.use_bias) with_bias_grad.bias_grad = c.dw + in_ * units;  // fused into the GEMM where the backend can
      with_bias_grad.rounding = c.rounding;
      c.be->gemm(Trans::Yes, Trans::No, in_, units, rows, c.x, in_, c.dy, units, 0.0f, dkernel, units, with_bias_grad);
    }
    Epilogue dx_ep;
    dx_ep.rounding = c.rounding;
    if (c.dx) c.be->gemm(Trans::No, Trans::Yes, rows, in_, units, c.dy, units, c.w, units, 0.0f, c.dx, in_, dx_ep);
  }

  // Gemm with Keras's kernel [in, units] stored transposed (transB = 1, the form runtimes know best),
  // then the activation; on sequences MatMul (over the last axis) and Add.
  void export_onnx(OnnxLayerExport& e) const override {
    const auto& w = e.weights();
    const int64_t units = spec_.units;
    if (positions_ != 1) {
      const std::string linear = spec_.activation == Activation::None ? name() : name() + "/linear";
      const std::string product = spec_.use_bias ? name() + "/matmul" : linear;
      e.node("MatMul", {e.input_plain(), e.constant("kernel", {in_, units}, w[0])}, {product});
      if (spec_.use_bias) e.node("Add", {product, e.constant("bias", {units}, w[1])}, {linear});
      e.activation(spec_.activation, linear, name(), -1);
      e.output(name(), false);
      return;
    }
    std::vector<float> kernel_t(w[0].size());
    for (int64_t r = 0; r < in_; ++r)
      for (int64_t u = 0; u < units; ++u)
        kernel_t[static_cast<size_t>(u * in_ + r)] = w[0][static_cast<size_t>(r * units + u)];
    std::vector<std::string> inputs{e.input_plain(), e.constant("kernel", {units, in_}, std::move(kernel_t))};
    if (spec_.use_bias) inputs.push_back(e.constant("bias", {units}, w[1]));
    const std::string linear = spec_.activation == Activation::None ? name() : name() + "/linear";
    e.node("Gemm", inputs, {linear}, {io::OnnxAttribute::integer("transB", 1)});
    e.activation(spec_.activation, linear, name(), 1);
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("units", spec_.units);
    config.set("activation", activation_name(spec_.activation));
    config.set("use_bias", spec_.use_bias);
    init_.add_to(config);
  }

 private:
  int64_t in_ = 0;
  int64_t positions_ = 1;  // rows of the GEMM per sample: 1, or the positions of a sequence
  KernelAndBiasInitializers init_;
};

}  // namespace

void read_dense_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  spec.units = config.at("units", what).as_int(what + " units");
  if (const json::Value* act = config.find("activation")) spec.activation = activation_from_json(*act, what + " activation");
  if (const json::Value* bias = config.find("use_bias")) spec.use_bias = bias->as_bool(what + " use_bias");
}

std::unique_ptr<Layer> make_dense_layer(const LayerSpec& spec) {
  checked_dimension(spec.units, 1, "Dense units");
  require(is_valid(spec.activation), Status::InvalidArgument,
          "unknown activation " + std::to_string(static_cast<int>(spec.activation)));
  return std::make_unique<DenseLayer>(spec);
}

}  // namespace kx::core
