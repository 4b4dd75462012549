// Pooling over the steps of (steps, channels) samples, as keras.layers.MaxPooling1D, AveragePooling1D
// ("valid" windows, strides defaulting to the pool size) and GlobalAveragePooling1D (the mean of each
// channel over the steps, (steps, c) -> (c) or (1, c) with keepdims). Windows one row high, run by the
// 2-D pooling kernels. Their settings live in LayerSpec::config. GlobalAveragePooling1D reached by a
// Keras mask averages the steps the mask keeps, as Keras does; a sample masked throughout gives 0s
// (Keras's 0 / 0 gives NaN).
#include "core/checked_size.hpp"
#include "core/layers/broadcast_shape.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::Window2d;

void require_channels_last(const json::Value& config, const std::string& what) {
  if (const json::Value* v = config.find("data_format"); v && !v->is_null())
    require(v->as_string(what + " data_format") == "channels_last", Status::Unsupported,
            what + ": only data_format \"channels_last\" is supported");
}

json::Value config_of(const LayerSpec& spec) { return json::parse(spec.config.empty() ? "{}" : spec.config); }

// A window `pool` steps long every `stride` steps; (steps, channels) samples.
Window2d steps_window(const Shape& in, int64_t pool, int64_t stride) {
  Window2d g;
  g.in_h = g.k_h = g.out_h = 1;
  g.in_w = in[0];
  g.channels = in[1];
  g.k_w = pool;
  g.stride_w = stride;
  g.out_w = (g.in_w - pool) / stride + 1;
  return g;
}

class Pooling1dLayer : public Layer {
 public:
  Pooling1dLayer(const LayerSpec& spec, const char* class_name) : Layer(spec) {
    const std::string what = std::string(class_name) + " \"" + spec.name + "\"";
    const json::Value config = config_of(spec);
    if (const json::Value* v = config.find("pool_size")) pool_ = size_from_json(*v, what + " pool_size");
    stride_ = pool_;
    if (const json::Value* v = config.find("strides"); v && !v->is_null()) stride_ = size_from_json(*v, what + " strides");
    if (const json::Value* v = config.find("padding"))
      require(padding_from_name(v->as_string(what + " padding"), what) == Padding::Valid, Status::Unsupported,
              what + ": only \"valid\" padding is supported for pooling");
    require_channels_last(config, what);
    checked_dimension(pool_, 1, what + " pool_size");
    checked_dimension(stride_, 1, what + " strides");
  }

  Shape build(const Shape& in) override {
    const std::string what = std::string(class_name()) + " layer \"" + name() + "\"";
    require(in.size() == 2, Status::InvalidArgument, what + " needs samples of shape (steps, channels), gets " + to_string(in));
    require(in[0] >= pool_, Status::InvalidArgument,
            what + ": pool " + std::to_string(pool_) + " is longer than its input " + to_string(in));
    g_ = steps_window(in, pool_, stride_);
    return {g_.out_w, g_.channels};
  }

  void export_onnx(OnnxLayerExport& e) const override {
    e.node(spec_.kind == LayerKind::MaxPooling1D ? "MaxPool" : "AveragePool", {e.input_ncl()}, {name() + "/pooled"},
           {io::OnnxAttribute::ints("kernel_shape", {pool_}), io::OnnxAttribute::ints("strides", {stride_})});
    e.node("Transpose", {name() + "/pooled"}, {name()}, {io::OnnxAttribute::ints("perm", {0, 2, 1})});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("pool_size", json::Value::Array{json::Value(pool_)});
    config.set("strides", json::Value::Array{json::Value(stride_)});
    config.set("padding", "valid");
    config.set("data_format", "channels_last");
  }
  int64_t pool_ = 2, stride_ = 2;
  Window2d g_;
};

class MaxPooling1dLayer final : public Pooling1dLayer {
 public:
  explicit MaxPooling1dLayer(const LayerSpec& spec) : Pooling1dLayer(spec, "MaxPooling1D") {}
  bool rounds_output(bool) const override { return true; }  // the maximum of 16-bit values is one
  // Windows that do not overlap route each gradient to one place: dx holds dy's values and zeros.
  bool rounds_input_grads(bool) const override { return stride_ >= pool_; }
  void forward(const LayerContext& c) const override { c.be->max_pool_forward(g_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->max_pool_backward(g_, c.rows, c.x, c.y, c.dy, c.dx);
  }
};

class AveragePooling1dLayer final : public Pooling1dLayer {
 public:
  explicit AveragePooling1dLayer(const LayerSpec& spec) : Pooling1dLayer(spec, "AveragePooling1D") {}
  bool backward_reads_input() const override { return false; }  // dy spread over each window
  bool backward_reads_output() const override { return false; }
  void forward(const LayerContext& c) const override { c.be->avg_pool_forward(g_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->avg_pool_backward(g_, c.rows, c.dy, c.dx);
  }
};

class GlobalAveragePooling1dLayer final : public Layer {
 public:
  explicit GlobalAveragePooling1dLayer(const LayerSpec& spec) : Layer(spec) {
    const std::string what = "GlobalAveragePooling1D \"" + spec.name + "\"";
    const json::Value config = config_of(spec);
    if (const json::Value* v = config.find("keepdims")) keepdims_ = v->as_bool(what + " keepdims");
    require_channels_last(config, what);
  }

  Shape build(const Shape& in) override {
    require(in.size() == 2, Status::InvalidArgument,
            "GlobalAveragePooling1D layer \"" + name() + "\" needs samples of shape (steps, channels), gets " +
                to_string(in));
    g_ = steps_window(in, in[0], in[0]);
    return keepdims_ ? Shape{1, in[1]} : Shape{in[1]};
  }
  void take_input_masks(const std::vector<int>& sources) override { masked_ = sources.front() >= 0; }
  // With a mask: each step's weight (the mask over the count of steps it keeps) and the count.
  int64_t scratch_per_sample() const override { return masked_ ? steps() + 1 : 0; }
  bool backward_reads_input() const override { return false; }  // dy spread over the steps
  bool backward_reads_output() const override { return false; }
  void forward(const LayerContext& c) const override {
    if (!c.mask) return c.be->avg_pool_forward(g_, c.rows, c.x, c.y);
    const int64_t T = steps(), F = g_.channels, rows = c.rows;
    float* weight = c.scratch;
    float* count = weight + rows * T;
    // count = mask . mask (masks are 1 or 0), at least 1; weight = mask / count; y = weight x per sample.
    backend::BatchedGemm g;
    g.M = 1, g.N = 1, g.K = T, g.outer = rows, g.lda = T, g.ldb = 1, g.ldc = 1;
    g.a_outer = T, g.b_outer = T, g.c_outer = 1;
    c.be->gemm_batched(g, c.mask, c.mask, count);
    c.be->scale_shift(rows, 1.0f, -1.0f, count, count);
    c.be->pointwise_activation_forward(Activation::Relu, rows, count, count);
    c.be->scale_shift(rows, 1.0f, 1.0f, count, count);
    c.be->binary_forward(broadcast_shape(backend::BinaryOp::Divide, {T}, {1}, name()), rows, c.mask, count, weight);
    g.N = F, g.ldb = F, g.ldc = F, g.b_outer = T * F, g.c_outer = F;  // float32 weights: the plan rounds y
    c.be->gemm_batched(g, weight, c.x, c.y);
  }
  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    if (!c.mask) return c.be->avg_pool_backward(g_, c.rows, c.dy, c.dx);
    // dx[t, f] = weight[t] dy[f] per sample.
    const backend::BinaryShape s = broadcast_shape(backend::BinaryOp::Multiply, {steps(), 1}, {1, g_.channels}, name());
    c.be->binary_forward(s, c.rows, c.scratch, c.dy, c.dx);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    if (masked_) return e.not_exportable("GlobalAveragePooling1D over a Keras mask has no ONNX export in kx");
    e.node("ReduceMean", {e.input_sequence()}, {name()},
           {io::OnnxAttribute::ints("axes", {1}), io::OnnxAttribute::integer("keepdims", keepdims_ ? 1 : 0)});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("data_format", "channels_last");
    config.set("keepdims", keepdims_);
  }

 private:
  int64_t steps() const { return g_.in_w; }
  bool keepdims_ = false, masked_ = false;
  Window2d g_;
};

}  // namespace

std::unique_ptr<Layer> make_max_pooling1d_layer(const LayerSpec& spec) { return std::make_unique<MaxPooling1dLayer>(spec); }
std::unique_ptr<Layer> make_average_pooling1d_layer(const LayerSpec& spec) {
  return std::make_unique<AveragePooling1dLayer>(spec);
}
std::unique_ptr<Layer> make_global_average_pooling1d_layer(const LayerSpec& spec) {
  return std::make_unique<GlobalAveragePooling1dLayer>(spec);
}

}  // namespace kx::core
