#include "core/layers/onnx_recurrent_export.hpp"

#include <string>

namespace kx::core {

using io::OnnxAttribute;

namespace {

// For each of ONNX's gate blocks, Keras's: LSTM's i, o, f, c are Keras's blocks 0, 3, 1, 2 (Keras
// orders i, f, c, o); GRU's z, r, h are in Keras's order.
constexpr int64_t kLstmGateOrder[] = {0, 3, 1, 2};
constexpr int64_t kGruGateOrder[] = {0, 1, 2};

// The activations of a run as ONNX's RNN functions. activation_alpha and activation_beta are read in
// order by the functions that take them, so each such function adds its own.
struct OnnxFunctions {
  std::vector<std::string> names;
  std::vector<float> alphas, betas;
};

// The activations kx's recurrent cells compute (backend/recurrent_math.hpp) as ONNX's RNN functions.
struct OnnxFunction {
  Activation activation;
  const char* name;
};
constexpr OnnxFunction kFunctions[] = {
    {Activation::None, "Affine"},  // linear: with alpha 1, beta 0
    {Activation::Relu, "Relu"},
    {Activation::Sigmoid, "Sigmoid"},
    {Activation::Tanh, "Tanh"},
};

void add_function(OnnxLayerExport& e, Activation a, OnnxFunctions& f) {
  for (const OnnxFunction& known : kFunctions) {
    if (known.activation != a) continue;
    f.names.emplace_back(known.name);
    if (a == Activation::None) {
      f.alphas.push_back(1.0f);
      f.betas.push_back(0.0f);
    }
    return;
  }
  e.not_exportable(std::string("its activation ") + activation_name(a) +
                   " is not one of linear, relu, sigmoid and tanh, which kx's recurrent cells compute");
}

// m [rows, G u] (a Keras kernel, or one bias row) appended as ONNX's [G u, rows], gates in ONNX's order.
void append_gates_transposed(const float* m, int64_t rows, int64_t units, const int64_t* order, int64_t gates,
                             std::vector<float>& out) {
  const int64_t width = gates * units;
  for (int64_t g = 0; g < gates; ++g)
    for (int64_t j = 0; j < units; ++j)
      for (int64_t r = 0; r < rows; ++r) out.push_back(m[r * width + order[g] * units + j]);
}

}  // namespace

void export_recurrent_onnx(OnnxLayerExport& e, const std::vector<RecurrentSettings>& runs) {
  // ONNX's sequence_lens equals Keras's masking only where every sequence is padded at its end; a mask
  // anywhere else carries the state over masked steps, which no ONNX recurrent operator does.
  if (e.input_masked())
    e.not_exportable("a mask reaches it (Embedding mask_zero), and ONNX's sequence_lens matches Keras's masking "
                     "only for sequences padded at their end");
  const RecurrentSettings& first = runs.front();
  const auto directions = static_cast<int64_t>(runs.size());
  // ONNX's bidirectional runs the first forward and the second backward.
  if (directions == 2 && (first.go_backwards || !runs[1].go_backwards))
    e.not_exportable("its wrapped layer goes backwards (ONNX's bidirectional runs the forward layer forward)");
  const bool lstm = first.cell == CellKind::Lstm;
  const int64_t steps = e.input_shape()[0], features = e.input_shape()[1], units = first.units;
  const int64_t gates = lstm ? 4 : 3;
  const int64_t* order = lstm ? kLstmGateOrder : kGruGateOrder;
  bool biased = false;
  for (const RecurrentSettings& r : runs) biased = biased || r.use_bias;
  std::vector<float> w, rw, b;
  OnnxFunctions functions;
  size_t next = 0;
  for (const RecurrentSettings& r : runs) {
    append_gates_transposed(e.weights()[next++].data(), features, units, order, gates, w);
    append_gates_transposed(e.weights()[next++].data(), units, units, order, gates, rw);
    // ONNX's bias: the inputs' [G u] then the recurrent one's; Keras's LSTM has one, GRU both.
    if (r.use_bias) {
      const float* bias = e.weights()[next++].data();
      append_gates_transposed(bias, 1, units, order, gates, b);
      if (lstm)
        b.insert(b.end(), static_cast<size_t>(gates * units), 0.0f);
      else
        append_gates_transposed(bias + gates * units, 1, units, order, gates, b);
    } else if (biased) {
      b.insert(b.end(), static_cast<size_t>(2 * gates * units), 0.0f);
    }
    // LSTM: the gates', the cell input's and the output's; GRU: the gates' and the candidate's.
    add_function(e, r.recurrent_activation, functions);
    add_function(e, r.activation, functions);
    if (lstm) add_function(e, r.activation, functions);
  }

  const int64_t width = gates * units;
  std::string x = e.transpose(e.input_sequence(), "/time_major", {1, 0, 2});
  // A single run going backwards reads the steps in the order it runs them: its outputs are then in
  // Keras's order, the input's reversed.
  if (directions == 1 && first.go_backwards) {
    std::vector<int64_t> reversed;
    for (int64_t t = steps; t-- > 0;) reversed.push_back(t);
    x = e.step("Gather", {x, e.constant_ints("reversed_steps", {steps}, std::move(reversed))}, "/run_order",
               {OnnxAttribute::integer("axis", 0)});
  }
  std::vector<std::string> inputs{x, e.constant("W", {directions, width, features}, std::move(w)),
                                  e.constant("R", {directions, width, units}, std::move(rw))};
  if (biased) inputs.push_back(e.constant("B", {directions, 2 * width}, std::move(b)));
  std::vector<OnnxAttribute> attributes{
      OnnxAttribute::integer("hidden_size", units),
      OnnxAttribute::text("direction", directions == 2 ? "bidirectional" : "forward"),
      OnnxAttribute::texts("activations", std::move(functions.names))};
  // An attribute has at least one value (onnx.checker).
  if (!functions.alphas.empty()) {
    attributes.push_back(OnnxAttribute::reals("activation_alpha", std::move(functions.alphas)));
    attributes.push_back(OnnxAttribute::reals("activation_beta", std::move(functions.betas)));
  }
  // Keras 3's GRU (reset_after) applies the reset gate after the recurrent product and its bias.
  if (!lstm) attributes.push_back(OnnxAttribute::integer("linear_before_reset", 1));
  // Y [steps, directions, N, u] (the backward direction's in input order), Y_h [directions, N, u]
  // (each direction's last step).
  const std::string run = e.name() + "/Y";
  e.node(lstm ? "LSTM" : "GRU", inputs, {run, run + "_h"}, attributes);
  // Batch-major, the directions' outputs side by side.
  if (first.return_sequences) {
    e.transpose(run, "/batch_major", {2, 0, 1, 3});
    return e.output(e.reshape("/batch_major", "/output", {-1, steps, directions * units}), false);
  }
  e.transpose(run + "_h", "/batch_major", {1, 0, 2});
  e.output(e.reshape("/batch_major", "/output", {-1, directions * units}), false);
}

}  // namespace kx::core
