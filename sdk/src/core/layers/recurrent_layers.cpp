// LSTM and GRU, as keras.layers.LSTM and keras.layers.GRU (Keras 3: GRU with reset_after, bias
// [2, 3 units]) over samples [steps, features]: the last step's output [units], or every step's
// [steps, units] with return_sequences (which also carries the input's mask on, as Keras does), and
// Keras's input dropout in training (one mask per sample, the same at every step). The
// weights are the cell's, named and kept as Keras names them (lstm/lstm_cell/kernel, in a .keras
// file layers/lstm/cell/vars/0). The run itself is recurrent_sequence.hpp's.
#include <string>

#include "core/layers/layer.hpp"
#include "core/layers/onnx_recurrent_export.hpp"
#include "core/layers/recurrent_sequence.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class RecurrentLayer final : public Layer {
 public:
  RecurrentLayer(const LayerSpec& spec, RecurrentSettings s) : Layer(spec), s_(s) {}

  Shape build(const Shape& in) override {
    require(in.size() == 2, Status::InvalidArgument,
            std::string(class_name()) + " layer \"" + name() + "\" needs samples [steps, features] but gets " +
                to_string(in));
    seq_ = RecurrentSequence(s_, in[0], in[1]);
    if (s_.return_sequences) return {in[0], s_.units};
    return {s_.units};
  }
  std::vector<ParamSpec> params() const override {
    return seq_.params(s_.cell == CellKind::Lstm ? "lstm_cell/" : "gru_cell/", "cell");
  }
  int64_t scratch_per_sample() const override { return seq_.scratch_per_sample(); }
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return seq_.workspace_floats(rows);
  }
  bool passes_mask() const override { return s_.return_sequences; }
  // The scratch holds what backward needs besides x.
  bool backward_reads_output() const override { return false; }

  void forward(const LayerContext& c) const override {
    seq_.forward(*c.be, c.rows, c.x, c.w, c.mask, c.scratch, c.workspace, c.y, output_layout(), dropout_of(c));
  }
  void backward(const LayerContext& c) const override {
    seq_.backward(*c.be, c.rows, c.x, c.w, c.dw, c.mask, c.scratch, c.workspace, c.dy, output_layout(), c.dx, 0.0f,
                  dropout_of(c));
  }

  // ONNX's LSTM or GRU operator (onnx_recurrent_export.hpp).
  void export_onnx(OnnxLayerExport& e) const override { export_recurrent_onnx(e, {s_}); }

 protected:
  void add_config(json::Value& config) const override { write_recurrent_settings(s_, config); }

 private:
  static InputDropout dropout_of(const LayerContext& c) { return {c.training, c.step_seed, c.seed_stream, c.first_row}; }
  SequenceOutput output_layout() const {
    const int64_t steps = s_.return_sequences ? seq_.steps() : 1;
    return {steps * s_.units, s_.units, false};
  }
  RecurrentSettings s_;
  RecurrentSequence seq_;
};

RecurrentSettings settings_of(const LayerSpec& spec, CellKind cell, const char* class_name) {
  const std::string what = std::string(class_name) + " \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs units");
  return read_recurrent_settings(json::parse(spec.config), cell, what);
}

}  // namespace

std::unique_ptr<Layer> make_lstm_layer(const LayerSpec& spec) {
  return std::make_unique<RecurrentLayer>(spec, settings_of(spec, CellKind::Lstm, "LSTM"));
}

std::unique_ptr<Layer> make_gru_layer(const LayerSpec& spec) {
  return std::make_unique<RecurrentLayer>(spec, settings_of(spec, CellKind::Gru, "GRU"));
}

}  // namespace kx::core
