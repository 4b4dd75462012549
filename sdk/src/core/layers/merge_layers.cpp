// Layers that join several inputs: Add (elementwise sum of equal shapes; Keras's masked sum when a
// Keras mask reaches it, keras_masked_add.hpp) and Concatenate (along the last axis, the channels of
// channels-last samples).
#include "core/layers/keras_masked_add.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class AddLayer final : public Layer {
 public:
  using Layer::Layer;

  Shape build(const Shape& in) override { return build_inputs({in}); }
  Shape build_inputs(const std::vector<Shape>& in) override {
    require(in.size() >= 2, Status::InvalidArgument,
            "Add layer \"" + name() + "\" needs at least 2 inputs, gets " + std::to_string(in.size()));
    for (const Shape& s : in)
      require(s == in.front(), Status::InvalidArgument,
              "Add layer \"" + name() + "\": inputs of shapes " + to_string(in.front()) + " and " + to_string(s) +
                  " differ");
    inputs_ = static_cast<int>(in.size());
    size_ = num_elements(in.front());
    add_.steps = in.front().front();
    add_.features = size_ / add_.steps;
    return in.front();
  }

  void take_input_masks(const std::vector<int>& sources) override {
    masked_ = sources[0] >= 0 || sources[1] >= 0;
    for (int k = 2; k < inputs_; ++k)
      require(sources[static_cast<size_t>(k)] < 0 && !masked_, Status::Unsupported,
              "Add layer \"" + name() + "\": Keras's masked sum of more than 2 inputs is not supported");
    // Keras ORs the masks when both inputs have one; the same mask twice is that mask.
    or_mask_ = sources[0] >= 0 && sources[1] >= 0 && sources[0] != sources[1];
    passes_ = sources[0] >= 0 && sources[0] == sources[1];
  }
  bool computes_mask() const override { return or_mask_; }
  bool passes_mask() const override { return passes_; }
  int64_t scratch_per_sample() const override { return or_mask_ ? add_.steps : 0; }  // the OR of the masks
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return masked_ ? add_.workspace_floats(rows) : 0;
  }

  void forward(const LayerContext& c) const override {
    const int64_t n = c.rows * size_;
    if (masked_ && (c.masks[0] || c.masks[1])) {
      add_.forward(*c.be, c.rows, c.masks[0], c.masks[1], c.xs[0], c.xs[1], c.y, c.workspace);
      if (or_mask_) add_.output_mask(*c.be, c.rows, c.masks[0], c.masks[1], c.scratch, c.workspace);
      return;
    }
    c.be->add(n, c.xs[0], c.xs[1], c.y);
    for (int k = 2; k < inputs_; ++k) c.be->add(n, c.y, c.xs[k], c.y);
  }
  bool rounds_input_grads(bool) const override { return true; }  // copies of dy (times 0, 1 or 2 when masked)
  bool backward_reads_input() const override { return false; }  // copies of dy
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    if (masked_ && (c.masks[0] || c.masks[1])) {
      add_.backward(*c.be, c.rows, c.masks[0], c.masks[1], c.dy, c.dxs[0], c.dxs[1], c.workspace);
      return;
    }
    for (int k = 0; k < inputs_; ++k)
      if (c.dxs[k]) c.be->copy(c.rows * size_, c.dy, c.dxs[k]);
  }

  void export_onnx(OnnxLayerExport& e) const override {
    if (masked_) return e.not_exportable("Add over a Keras mask (Keras's masked sum) has no ONNX export in kx");
    const bool nchw = e.input_prefers_nchw();
    std::string sum = e.input_as(0, nchw);
    for (size_t k = 1; k < e.num_inputs(); ++k) {
      const std::string out = k + 1 == e.num_inputs() ? name() : name() + "/sum" + std::to_string(k);
      e.node("Add", {sum, e.input_as(k, nchw)}, {out});
      sum = out;
    }
    e.output(name(), nchw);
  }

 private:
  int inputs_ = 0;
  int64_t size_ = 0;
  MaskedAdd add_;
  bool masked_ = false, or_mask_ = false, passes_ = false;
};

class ConcatenateLayer final : public Layer {
 public:
  using Layer::Layer;

  Shape build(const Shape& in) override { return build_inputs({in}); }
  Shape build_inputs(const std::vector<Shape>& in) override {
    require(in.size() >= 2, Status::InvalidArgument,
            "Concatenate layer \"" + name() + "\" needs at least 2 inputs, gets " + std::to_string(in.size()));
    require_last_axis(spec_, in.front(), class_name());
    Shape out = in.front();
    out.back() = 0;
    for (const Shape& s : in) {
      require(s.size() == out.size() && std::equal(s.begin(), s.end() - 1, out.begin()), Status::InvalidArgument,
              "Concatenate layer \"" + name() + "\": inputs of shapes " + to_string(in.front()) + " and " +
                  to_string(s) + " differ before the last axis");
      widths_.push_back(s.back());
      out.back() += s.back();
    }
    positions_ = num_elements(in.front()) / in.front().back();
    return out;
  }

  // Keras's Concatenate merges its inputs' masks; kx does not yet.
  void take_input_masks(const std::vector<int>& sources) override { refuse_masks(sources, *this); }
  // Values are only moved, both ways.
  bool rounds_output(bool) const override { return true; }
  bool rounds_input_grads(bool) const override { return true; }
  void forward(const LayerContext& c) const override {
    const int64_t total = width(), rows = c.rows * positions_;
    int64_t at = 0;
    for (size_t k = 0; k < widths_.size(); ++k) {
      c.be->copy_columns(rows, widths_[k], c.xs[k], widths_[k], c.y + at, total);
      at += widths_[k];
    }
  }
  bool backward_reads_input() const override { return false; }  // copies of dy
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    const int64_t total = width(), rows = c.rows * positions_;
    int64_t at = 0;
    for (size_t k = 0; k < widths_.size(); ++k) {
      if (c.dxs[k]) c.be->copy_columns(rows, widths_[k], c.dy + at, total, c.dxs[k], widths_[k]);
      at += widths_[k];
    }
  }

  // The last axis of kx's order: the channels, axis 1 of NCHW images.
  void export_onnx(OnnxLayerExport& e) const override {
    const bool nchw = e.input_is_image();
    std::vector<std::string> parts;
    for (size_t k = 0; k < e.num_inputs(); ++k) parts.push_back(e.input_as(k, nchw));
    e.node("Concat", parts, {name()}, {io::OnnxAttribute::integer("axis", nchw ? 1 : e.input_rank() - 1)});
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override { config.set("axis", -1); }

 private:
  int64_t width() const {
    int64_t w = 0;
    for (int64_t v : widths_) w += v;
    return w;
  }
  std::vector<int64_t> widths_;
  int64_t positions_ = 0;
};

}  // namespace

void read_concatenate_config(const json::Value& config, const std::string& what, LayerSpec& spec) {
  if (const json::Value* axis = config.find("axis")) spec.axis = axis->as_int(what + " axis");
}

std::unique_ptr<Layer> make_add_layer(const LayerSpec& spec) { return std::make_unique<AddLayer>(spec); }
std::unique_ptr<Layer> make_concatenate_layer(const LayerSpec& spec) {
  return std::make_unique<ConcatenateLayer>(spec);
}

}  // namespace kx::core
