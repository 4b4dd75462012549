// Layers that join several inputs: Add (elementwise sum of equal shapes; with Keras's masks on every
// input, its output carries their OR, as Keras's Merge.compute_mask) and Concatenate (along the last
// axis, the channels of channels-last samples).
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
    steps_ = in.front().front();
    return in.front();
  }

  // Keras's Add sums the values as they are; its output's mask is the OR of the inputs' when every input
  // has one (the same mask on every input is that mask), and none otherwise.
  void take_input_masks(const std::vector<int>& sources) override {
    bool all = true, same = true;
    for (int m : sources) {
      all = all && m >= 0;
      same = same && m == sources.front();
    }
    passes_ = all && same;
    or_mask_ = all && !same;
  }
  bool computes_mask() const override { return or_mask_; }
  bool passes_mask() const override { return passes_; }
  int64_t scratch_per_sample() const override { return or_mask_ ? steps_ : 0; }  // the masks' OR
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override { return or_mask_ ? rows * steps_ : 0; }

  void forward(const LayerContext& c) const override {
    const int64_t n = c.rows * size_;
    c.be->add(n, c.xs[0], c.xs[1], c.y);
    for (int k = 2; k < inputs_; ++k) c.be->add(n, c.y, c.xs[k], c.y);
    if (or_mask_) or_of_masks(c);
  }
  bool rounds_input_grads(bool) const override { return true; }  // copies of dy
  bool backward_reads_input() const override { return false; }  // copies of dy
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    for (int k = 0; k < inputs_; ++k)
      if (c.dxs[k]) c.be->copy(c.rows * size_, c.dy, c.dxs[k]);
  }

  void export_onnx(OnnxLayerExport& e) const override {
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
  // scratch = OR of the masks = 1 - prod(1 - mask) for masks of 1 and 0.
  void or_of_masks(const LayerContext& c) const {
    const int64_t n = c.rows * steps_;
    c.be->scale_shift(n, -1.0f, 1.0f, c.masks[0], c.scratch);
    for (int k = 1; k < inputs_; ++k) {
      c.be->scale_shift(n, -1.0f, 1.0f, c.masks[k], c.workspace);
      c.be->multiply(n, c.scratch, c.workspace, c.scratch);
    }
    c.be->scale_shift(n, -1.0f, 1.0f, c.scratch, c.scratch);
  }

  int inputs_ = 0;
  int64_t size_ = 0, steps_ = 0;
  bool or_mask_ = false, passes_ = false;
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
