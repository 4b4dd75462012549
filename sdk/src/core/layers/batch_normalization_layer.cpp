// BatchNormalization over the last axis, as Keras: in training the batch's own mean and (biased)
// variance normalise it and the moving statistics follow them; in evaluate, predict, or when the layer
// is frozen (trainable false), the moving statistics normalise.
//
// The moving statistics are parameters the optimizer does not train. Backward writes the step that
// updates them into their gradient slot, (moving - batch) * (1 - momentum) weighted by the replica's
// share of the global batch, and the optimizer subtracts the sum over replicas: one replica gets
// Keras's moving = moving - (moving - batch) * (1 - momentum), and N replicas (each normalising with
// its own statistics, as Keras does) the average of theirs, so every replica keeps equal weights.
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class BatchNormalizationLayer final : public Layer {
 public:
  explicit BatchNormalizationLayer(const LayerSpec& spec)
      : Layer(spec),
        init_(spec, {{"beta_initializer", "beta"}, {"gamma_initializer", "gamma"},
                     {"moving_mean_initializer", "moving_mean"}, {"moving_variance_initializer", "moving_variance"}}) {
    // ReLU6 or swish after a batch normalisation is one pass each way instead of two (Keras's mobile
    // models have one after almost every normalisation).
    applies_fused_activation_ = true;
    writes_input_grad_in_place_ = true;
  }

  Shape build(const Shape& in) override {
    require_last_axis(spec_, in, class_name());
    channels_ = in.back();
    positions_ = num_elements(in) / channels_;
    return in;
  }

  // gamma, beta, moving_mean, moving_variance: Keras's weights in Keras's order.
  std::vector<ParamSpec> params() const override {
    return init_.applied({{"gamma", {channels_}, Init::Ones, 0, 0, true},
                          {"beta", {channels_}, Init::Zeros, 0, 0, true},
                          {"moving_mean", {channels_}, Init::Zeros, 0, 0, false},
                          {"moving_variance", {channels_}, Init::Ones, 0, 0, false}});
  }
  // Keras computes batch normalisation in float32, its weights as they are, under a mixed policy too.
  bool autocasts_weights() const override { return false; }
  // The batch's mean and variance, and zeros (the mean that the frozen backward normalises with).
  int64_t scratch_floats(int64_t) const override { return 3 * channels_; }

  // Keras's batch normalisation takes its training statistics over the mask's steps only.
  void take_input_masks(const std::vector<int>& sources) override {
    require(sources.front() < 0, Status::Unsupported,
            "BatchNormalization layer \"" + name() + "\" reads a sequence with a Keras mask (Embedding's mask_zero): "
            "Keras's statistics over the masked steps are not supported");
  }
  void forward(const LayerContext& c) const override {
    const int64_t rows = c.rows * positions_, C = channels_;
    const float* gamma = c.w;
    const float* beta = c.w + C;
    if (c.training && trainable()) {
      float* mean = c.scratch;
      float* var = c.scratch + C;
      if (!c.moments_given) c.be->column_moments(rows, C, c.x, mean, var);  // else the layer before wrote them
      c.be->batch_norm_apply(rows, C, c.x, mean, var, eps(), gamma, beta, c.fused_activation, c.y);
    } else {
      c.be->batch_norm_apply(rows, C, c.x, c.w + 2 * C, c.w + 3 * C, eps(), gamma, beta, c.fused_activation, c.y);
    }
  }

  bool backward_reads_output() const override { return false; }  // x and the statistics give x_hat
  void backward(const LayerContext& c) const override {
    const int64_t rows = c.rows * positions_, C = channels_;
    const float* gamma = c.w;
    const float* beta = c.w + C;
    if (!trainable() || !c.dw) {
      if (!c.dx) return;
      if (c.fused_activation != Activation::None) {
        // dy at the activation's input, in place (dx may be dy): the training backward's first pass,
        // with the moving statistics, its sums landing in the batch statistics' scratch, unused here.
        c.be->batch_norm_backward(rows, C, c.x, c.dy, c.w + 2 * C, c.w + 3 * C, eps(), gamma, beta,
                                  c.fused_activation, nullptr, c.scratch, c.scratch + C);
      }
      // The moving statistics are constants: y = gamma * (x - mean) / sqrt(var + eps) + beta is affine.
      c.be->batch_norm_apply(rows, C, c.dy, c.scratch + 2 * C, c.w + 3 * C, eps(), gamma, nullptr, Activation::None,
                             c.dx);
      return;
    }
    const float* mean = c.scratch;
    const float* var = c.scratch + C;
    c.be->batch_norm_backward(rows, C, c.x, c.dy, mean, var, eps(), gamma, beta, c.fused_activation, c.dx, c.dw,
                              c.dw + C);
    const float step = static_cast<float>(1.0 - spec_.momentum) * c.batch_share;
    c.be->scaled_difference(C, step, c.w + 2 * C, mean, c.dw + 2 * C);
    c.be->scaled_difference(C, step, c.w + 3 * C, var, c.dw + 3 * C);
  }
  void export_onnx(OnnxLayerExport& e) const override {
    const auto& w = e.weights();  // gamma, beta, moving_mean, moving_variance
    e.normalize(w[0], w[1], w[2], w[3], spec_.epsilon);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("axis", -1);
    config.set("momentum", spec_.momentum);
    config.set("epsilon", spec_.epsilon);
    config.set("center", true);
    config.set("scale", true);
    init_.add_to(config);
  }

 private:
  // Keras 3 adds epsilon to the float32 variance: the float32 of the double setting.
  float eps() const { return static_cast<float>(spec_.epsilon); }
  KerasInitializers init_;
  int64_t channels_ = 0, positions_ = 0;
};

}  // namespace

void read_batch_normalization_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  if (const json::Value* axis = config.find("axis")) spec.axis = axis->as_int(what + " axis");
  if (const json::Value* m = config.find("momentum")) spec.momentum = m->as_number(what + " momentum");
  if (const json::Value* e = config.find("epsilon")) spec.epsilon = e->as_number(what + " epsilon");
  for (const char* flag : {"center", "scale"})
    if (const json::Value* f = config.find(flag))
      require(f->as_bool(what + " " + flag), Status::Unsupported, what + ": " + flag + " false is not supported");
}

std::unique_ptr<Layer> make_batch_normalization_layer(const LayerSpec& spec) {
  require(spec.momentum >= 0 && spec.momentum <= 1, Status::InvalidArgument,
          "BatchNormalization momentum must be in [0, 1]");
  require(spec.epsilon > 0, Status::InvalidArgument, "BatchNormalization epsilon must be positive");
  return std::make_unique<BatchNormalizationLayer>(spec);
}

}  // namespace kx::core
