// Normalization over the last axis, y = (x - mean) / sqrt(variance) per channel, with given statistics
// (keras.layers.Normalization(mean=..., variance=...)) or adapted ones: a config whose mean and
// variance are null (EfficientNet's stem, a layer Keras adapted) keeps them in the model's weights,
// mean 0 and variance 1 until weights are loaded. A variance of 0 divides by 1e-7, as Keras's
// max(sqrt(variance), epsilon) does (epsilon 1e-14 under the root gives the same there).
//
// The statistics are weights the optimizer does not train (Keras keeps those of adapt() as
// non-trainable weights too), so they travel with the model and its checkpoints and set_weights may
// replace them. Backward writes a zero step for them and passes dx = dy / sqrt(variance).
#include <cmath>
#include <string>

#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

constexpr float kEpsilon = 1e-14f;

class NormalizationLayer final : public Layer {
 public:
  using Layer::Layer;

  Shape build(const Shape& in) override {
    require_last_axis(spec_, in, class_name());
    channels_ = in.back();
    positions_ = num_elements(in) / channels_;
    const size_t n = spec_.mean.size();
    if (n == 0) return in;  // adapted: the weights hold them
    require(n == 1 || static_cast<int64_t>(n) == channels_, Status::InvalidArgument,
            "Normalization layer \"" + name() + "\" has " + std::to_string(n) +
                " means and variances for an input with " + std::to_string(channels_) +
                " channels (give one value, or one per channel)");
    return in;
  }

  std::vector<ParamSpec> params() const override {
    return {statistic("mean", spec_.mean, 0.0f), statistic("variance", spec_.variance, 1.0f)};
  }
  // Zeros: the mean of the affine map that backward applies to dy.
  int64_t scratch_floats(int64_t) const override { return channels_; }

  void forward(const LayerContext& c) const override {
    c.be->batch_norm_apply(c.rows * positions_, channels_, c.x, c.w, c.w + channels_, kEpsilon, nullptr, nullptr,
                           Activation::None, c.y);
  }

  // Keras's adapted layer keeps its adapt() sample count after mean and variance.
  size_t keras_only_counters() const override { return spec_.mean.empty() ? 1 : 0; }

  bool backward_reads_input() const override { return false; }  // affine: dy alone
  bool backward_reads_output() const override { return false; }

  void backward(const LayerContext& c) const override {
    if (c.dw) c.be->fill_zero(2 * static_cast<size_t>(channels_) * sizeof(float), c.dw);
    if (c.dx)
      c.be->batch_norm_apply(c.rows * positions_, channels_, c.dy, c.scratch, c.w + channels_, kEpsilon, nullptr,
                             nullptr, Activation::None, c.dx);
  }
  void export_onnx(OnnxLayerExport& e) const override {
    const auto& w = e.weights();  // mean, variance
    const std::vector<float> ones(w[0].size(), 1.0f), zeros(w[0].size(), 0.0f);
    e.normalize(ones, zeros, w[0], w[1], kEpsilon);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("axis", -1);
    const bool adapted = spec_.mean.empty();
    config.set("mean", adapted ? json::Value() : values_json(spec_.mean));
    config.set("variance", adapted ? json::Value() : values_json(spec_.variance));
    config.set("invert", false);
  }

 private:
  // One value per channel; a single given value stands for every channel; none (adapted statistics)
  // starts at `adapted` (Keras's initial mean 0, variance 1).
  ParamSpec statistic(const char* name, const std::vector<float>& given, float adapted) const {
    ParamSpec p{name, {channels_}, Init::Values, 0, 0, false};
    if (given.empty())
      p.values.assign(static_cast<size_t>(channels_), adapted);
    else
      p.values = given.size() == 1 ? std::vector<float>(static_cast<size_t>(channels_), given[0]) : given;
    return p;
  }
  static json::Value values_json(const std::vector<float>& v) {
    json::Value::Array a;
    for (float f : v) a.emplace_back(static_cast<double>(f));
    return json::Value{std::move(a)};
  }

  int64_t channels_ = 0, positions_ = 0;
};

// A number or an array of numbers, as float32.
std::vector<float> floats_from_json(const json::Value& v, const std::string& what) {
  if (v.type() == json::Value::Type::Number) return {static_cast<float>(v.as_number(what))};
  std::vector<float> out;
  for (const json::Value& e : v.as_array(what)) out.push_back(static_cast<float>(e.as_number(what)));
  return out;
}

// Keras's axis: an int, or a list (Keras 3 writes [3] for -1 of an image); only one axis is supported.
int64_t normalization_axis(const json::Value& axis, const std::string& what) {
  require(!axis.is_null(), Status::Unsupported, what + ": axis None (one mean over all axes) is not supported");
  if (axis.type() == json::Value::Type::Number) return axis.as_int(what + " axis");
  const json::Value::Array& axes = axis.as_array(what + " axis");
  require(axes.size() == 1, Status::Unsupported,
          what + ": axis " + axis.dump() + " is not supported, only the last (channels) axis");
  return axes[0].as_int(what + " axis");
}

}  // namespace

void read_normalization_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  if (const json::Value* axis = config.find("axis")) spec.axis = normalization_axis(*axis, what);
  if (const json::Value* invert = config.find("invert"))
    require(!invert->as_bool(what + " invert"), Status::Unsupported, what + ": invert true is not supported");
  // Both null (or absent): adapted statistics, which the weights hold.
  const json::Value* mean = config.find("mean");
  const json::Value* variance = config.find("variance");
  const bool no_mean = !mean || mean->is_null(), no_variance = !variance || variance->is_null();
  require(no_mean == no_variance, Status::InvalidArgument, what + ": give both mean and variance, or neither");
  spec.mean = no_mean ? std::vector<float>{} : floats_from_json(*mean, what + " mean");
  spec.variance = no_variance ? std::vector<float>{} : floats_from_json(*variance, what + " variance");
}

std::unique_ptr<Layer> make_normalization_layer(const LayerSpec& spec) {
  require(spec.mean.size() == spec.variance.size(), Status::InvalidArgument,
          "Normalization needs as many variances as means (none: adapted statistics from its weights), got " + std::to_string(spec.mean.size()) +
              " and " + std::to_string(spec.variance.size()));
  for (size_t i = 0; i < spec.mean.size(); ++i)
    require(std::isfinite(spec.mean[i]) && std::isfinite(spec.variance[i]) && spec.variance[i] >= 0,
            Status::InvalidArgument,
            "Normalization needs finite means and variances >= 0; value " + std::to_string(i) + " is mean " +
                std::to_string(spec.mean[i]) + ", variance " + std::to_string(spec.variance[i]));
  return std::make_unique<NormalizationLayer>(spec);
}

}  // namespace kx::core
