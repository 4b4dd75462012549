// Bidirectional, as keras.layers.Bidirectional around an LSTM or GRU with merge_mode "concat" (its
// default): the layer forward and a copy going backwards over the same input (and mask), their outputs
// side by side, the backward one's sequence turned back into input order. As in Keras, both return
// zeros at masked steps when they return sequences (zero_output_for_mask), and the weights are named
// bidirectional/forward_lstm/lstm_cell/kernel ..., kept in a .keras file under forward_layer/cell and
// backward_layer/cell.
#include <algorithm>
#include <string>

#include "core/layers/layer.hpp"
#include "core/layers/onnx_recurrent_export.hpp"
#include "core/layers/recurrent_sequence.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct Direction {
  std::string name;  // forward_lstm, backward_lstm
  RecurrentSettings settings;
};

struct BidirectionalSettings {
  CellKind cell = CellKind::Lstm;
  Direction forward, backward;
};

CellKind cell_of(const std::string& class_name, const std::string& what) {
  if (class_name == "LSTM") return CellKind::Lstm;
  if (class_name == "GRU") return CellKind::Gru;
  fail(Status::Unsupported, what + " wraps a " + class_name + "; kx wraps LSTM and GRU");
}

const char* class_of(CellKind cell) { return cell == CellKind::Lstm ? "LSTM" : "GRU"; }
const char* stem_of(CellKind cell) { return cell == CellKind::Lstm ? "lstm" : "gru"; }

BidirectionalSettings read_settings(const LayerSpec& spec) {
  const std::string what = "Bidirectional \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs the layer it wraps");
  const json::Value config = json::parse(spec.config);
  if (const json::Value* m = config.find("merge_mode"); m && !m->is_null())
    require(m->as_string(what + " merge_mode") == "concat", Status::Unsupported,
            what + ": merge_mode " + m->dump() + " is not supported, only \"concat\"");
  const json::Value& layer = config.at("layer", what);
  BidirectionalSettings s;
  s.cell = cell_of(layer.at("class_name", what + " layer").as_string(what + " layer class_name"), what);
  const json::Value& inner = layer.at("config", what + " layer");
  const std::string inner_name = inner.find("name") ? inner.at("name", what).as_string(what + " layer name") : stem_of(s.cell);
  s.forward.settings = read_recurrent_settings(inner, s.cell, what + " layer");
  s.backward.settings = s.forward.settings;
  s.backward.settings.go_backwards = !s.forward.settings.go_backwards;
  // Keras names the copies after the wrapped layer; a file made by Keras names them already.
  const bool named = inner_name.rfind("forward_", 0) == 0;
  s.forward.name = named ? inner_name : "forward_" + inner_name;
  s.backward.name = "backward_" + (named ? inner_name.substr(8) : inner_name);
  if (const json::Value* b = config.find("backward_layer"); b && !b->is_null()) {
    const json::Value& bc = b->at("config", what + " backward_layer");
    require(cell_of(b->at("class_name", what).as_string(what + " backward_layer class_name"), what) == s.cell,
            Status::Unsupported, what + ": the backward layer must be of the forward layer's class");
    s.backward.settings = read_recurrent_settings(bc, s.cell, what + " backward_layer");
    if (const json::Value* n = bc.find("name")) s.backward.name = n->as_string(what + " backward_layer name");
    require(s.backward.settings.units == s.forward.settings.units &&
                s.backward.settings.return_sequences == s.forward.settings.return_sequences,
            Status::InvalidArgument, what + ": the backward layer needs the forward one's units and return_sequences");
  }
  for (Direction* d : {&s.forward, &s.backward}) d->settings.zero_output_for_mask = d->settings.return_sequences;
  return s;
}

class BidirectionalLayer final : public Layer {
 public:
  BidirectionalLayer(const LayerSpec& spec, BidirectionalSettings s) : Layer(spec), s_(std::move(s)) {}

  Shape build(const Shape& in) override {
    require(in.size() == 2, Status::InvalidArgument,
            "Bidirectional layer \"" + name() + "\" needs samples [steps, features] but gets " + to_string(in));
    forward_ = RecurrentSequence(s_.forward.settings, in[0], in[1]);
    backward_ = RecurrentSequence(s_.backward.settings, in[0], in[1]);
    const int64_t width = 2 * units();
    if (sequences()) return {in[0], width};
    return {width};
  }
  std::vector<ParamSpec> params() const override {
    const std::string cell = std::string(stem_of(s_.cell)) + "_cell/";
    std::vector<ParamSpec> p = forward_.params(s_.forward.name + "/" + cell, "forward_layer/cell");
    for (ParamSpec& b : backward_.params(s_.backward.name + "/" + cell, "backward_layer/cell")) p.push_back(std::move(b));
    return p;
  }
  int64_t scratch_per_sample() const override { return forward_.scratch_per_sample() + backward_.scratch_per_sample(); }
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return std::max(forward_.workspace_floats(rows), backward_.workspace_floats(rows));
  }
  bool passes_mask() const override { return sequences(); }
  bool backward_reads_output() const override { return false; }

  void forward(const LayerContext& c) const override {
    forward_.forward(*c.be, c.rows, c.x, c.w, c.mask, c.scratch, c.workspace, c.y, layout(false), dropout_of(c, false));
    backward_.forward(*c.be, c.rows, c.x, c.w + forward_.num_params(), c.mask, backward_scratch(c), c.workspace,
                      c.y + units(), layout(true), dropout_of(c, true));
  }
  void backward(const LayerContext& c) const override {
    forward_.backward(*c.be, c.rows, c.x, c.w, c.dw, c.mask, c.scratch, c.workspace, c.dy, layout(false), c.dx, 0.0f,
                      dropout_of(c, false));
    backward_.backward(*c.be, c.rows, c.x, c.w + forward_.num_params(), c.dw ? c.dw + forward_.num_params() : nullptr,
                       c.mask, backward_scratch(c), c.workspace, c.dy + units(), layout(true), c.dx, 1.0f,
                       dropout_of(c, true));
  }

  // ONNX's LSTM or GRU operator with direction "bidirectional" (onnx_recurrent_export.hpp).
  void export_onnx(OnnxLayerExport& e) const override {
    export_recurrent_onnx(e, {s_.forward.settings, s_.backward.settings});
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("merge_mode", "concat");
    config.set("layer", direction_json(s_.forward));
    config.set("backward_layer", direction_json(s_.backward));
  }

 private:
  // Keras's two directions are two cells with masks of their own: the backward one draws from another stream.
  static InputDropout dropout_of(const LayerContext& c, bool backward_direction) {
    return {c.training, c.step_seed, c.seed_stream ^ (backward_direction ? 0x9e3779b97f4a7c15ull : 0ull), c.first_row};
  }
  int64_t units() const { return s_.forward.settings.units; }
  bool sequences() const { return s_.forward.settings.return_sequences; }
  float* backward_scratch(const LayerContext& c) const { return c.scratch + c.rows * forward_.scratch_per_sample(); }
  SequenceOutput layout(bool backward_direction) const {
    const int64_t width = 2 * units();
    return {(sequences() ? forward_.steps() : 1) * width, width, backward_direction && sequences()};
  }
  json::Value direction_json(const Direction& d) const {
    json::Value config{json::Value::Object{}};
    config.set("name", d.name);
    config.set("trainable", trainable());
    write_recurrent_settings(d.settings, config);
    json::Value layer{json::Value::Object{}};
    layer.set("module", "keras.layers");
    layer.set("class_name", class_of(s_.cell));
    layer.set("config", std::move(config));
    layer.set("registered_name", json::Value());
    return layer;
  }
  BidirectionalSettings s_;
  RecurrentSequence forward_, backward_;
};

}  // namespace

std::unique_ptr<Layer> make_bidirectional_layer(const LayerSpec& spec) {
  return std::make_unique<BidirectionalLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
