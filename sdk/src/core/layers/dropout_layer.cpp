// Dropout (inverted): in training y = x * mask, mask = 0 or 1/(1-rate); the identity otherwise.
//
// Keras's noise_shape gives the mask a shape of its own, broadcast over the sample: EfficientNet's
// drop-connect, noise_shape (None, 1, 1, 1), keeps or drops each sample's whole residual branch. The
// batch axis must stay None (a mask per sample): a mask shared across the batch would tie samples that
// replicas hold apart. Each other axis is None (the input's size), the input's size, or 1.
#include <cmath>
#include <optional>

#include "core/layers/broadcast_shape.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

// The mask's per-sample shape for an input of per-sample shape `in`; nullopt when the config has no
// noise_shape (or null).
std::optional<Shape> noise_shape_for(const LayerSpec& spec, const Shape& in, const std::string& what) {
  if (spec.config.empty()) return std::nullopt;
  const json::Value config = json::parse(spec.config);
  const json::Value* noise = config.find("noise_shape");
  if (!noise || noise->is_null()) return std::nullopt;
  const json::Value::Array& dims = noise->as_array(what + " noise_shape");
  require(dims.size() == in.size() + 1, Status::InvalidArgument,
          what + ": noise_shape has " + std::to_string(dims.size()) + " axes, the input (batch included) " +
              std::to_string(in.size() + 1));
  require(dims[0].is_null(), Status::Unsupported,
          what + ": noise_shape must keep the batch axis None (one mask per sample); got " + noise->dump());
  Shape mask;
  for (size_t k = 1; k < dims.size(); ++k) {
    const int64_t size = in[k - 1];
    const int64_t d = dims[k].is_null() ? size : dims[k].as_int(what + " noise_shape");
    require(d == 1 || d == size, Status::InvalidArgument,
            what + ": noise_shape " + noise->dump() + " does not broadcast to the input's axis " + std::to_string(k) +
                " of size " + std::to_string(size) + " (each axis None, 1 or the input's size)");
    mask.push_back(d);
  }
  return mask;
}

class DropoutLayer final : public Layer {
 public:
  using Layer::Layer;
  Shape build(const Shape& in) override {
    const std::string what = "Dropout layer \"" + name() + "\"";
    n_ = num_elements(in);
    noise_ = noise_shape_for(spec_, in, what);
    mask_size_ = noise_ ? num_elements(*noise_) : n_;
    if (mask_size_ == n_) {
      noise_.reset();  // a mask as large as the input: plain dropout
    } else {
      broadcast_ = broadcast_shape(backend::BinaryOp::Multiply, in, *noise_, what);
    }
    return in;
  }
  int64_t scratch_per_sample() const override { return mask_size_; }  // the mask

  // Keras's layer supports masking: the output carries the input's mask.
  bool passes_mask() const override { return true; }
  void forward(const LayerContext& c) const override {
    if (!c.training || spec_.rate <= 0.0f) {
      c.be->copy(c.rows * n_, c.x, c.y);
    } else if (!noise_) {
      c.be->dropout_forward(spec_.rate, c.step_seed, c.seed_stream, c.first_row * n_, c.rows * n_, c.x, c.scratch, c.y);
    } else {
      // The mask is drawn by the same kernel (so a replica holding rows from first_row on draws what
      // one device would), over the input's first elements: their product lands in y, which the
      // broadcast product then overwrites.
      c.be->dropout_forward(spec_.rate, c.step_seed, c.seed_stream, c.first_row * mask_size_, c.rows * mask_size_, c.x,
                            c.scratch, c.y);
      c.be->binary_forward(broadcast_, c.rows, c.x, c.scratch, c.y);
    }
  }

  // The mask (scratch) is all backward reads.
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

  void backward(const LayerContext& c) const override {
    if (!c.dx) return;
    if (spec_.rate <= 0.0f)
      c.be->copy(c.rows * n_, c.dy, c.dx);
    else if (!noise_)
      c.be->multiply(c.rows * n_, c.dy, c.scratch, c.dx);
    else
      c.be->binary_forward(broadcast_, c.rows, c.dy, c.scratch, c.dx);  // dx = dy * the broadcast mask
  }
  // The identity at inference: the layer's output is its input's value.
  void export_onnx(OnnxLayerExport& e) const override { e.output_is_input(); }

 protected:
  void add_config(json::Value& config) const override {
    config.set("rate", static_cast<double>(spec_.rate));
    json::Value noise;  // null: a mask as large as the input
    if (noise_) {
      json::Value::Array dims{json::Value()};
      for (const int64_t d : *noise_) dims.emplace_back(static_cast<double>(d));
      noise = json::Value{std::move(dims)};
    }
    config.set("noise_shape", std::move(noise));
  }

 private:
  int64_t n_ = 0, mask_size_ = 0;
  std::optional<Shape> noise_;  // the mask's per-sample shape when smaller than the input
  backend::BinaryShape broadcast_;
};

}  // namespace

void read_dropout_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  spec.rate = static_cast<float>(config.at("rate", what).as_number(what + " rate"));
}

std::unique_ptr<Layer> make_dropout_layer(const LayerSpec& spec) {
  require(std::isfinite(spec.rate) && spec.rate >= 0.0f && spec.rate < 1.0f, Status::InvalidArgument,
          "Dropout rate must be in [0, 1) (got " + std::to_string(spec.rate) + ")");
  return std::make_unique<DropoutLayer>(spec);
}

}  // namespace kx::core
