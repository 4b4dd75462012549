// One LSTM or GRU run over a sequence, forward and back through time, as Keras 3 computes it: the
// shared engine of the LSTM and GRU layers and of each direction of a Bidirectional.
//
// Forward: one GEMM of the inputs over the whole sequence (x [rows * steps, features] times the
// kernel, plus the input bias), then per time step a GEMM of the previous h with the recurrent kernel
// into that step's gates and one fused kernel for the gates and the state (lstm_step_forward,
// gru_step_forward). Backward through time reverses the steps (their kernels leave each step's
// pre-activation gradients in place of its gates, and one GEMM per step carries dh back through the
// recurrent kernel), then one GEMM each gives the kernel's and the input's gradients over the whole
// sequence, with the bias gradient fused.
//
// Scratch, kept from forward to backward, batch-major over all rows: the gates [rows, steps, G * u]
// (G = 4 for LSTM, 3 for GRU), the state h [rows, steps, u], and LSTM's c [rows, steps, u] or GRU's
// recurrent part h U + b [rows, steps, 3 u]. Everything is indexed by the input's time position, also
// when going backwards. With dropout in training, then the input mask and the dropped inputs; with
// recurrent_dropout, last, the state's masks [rows, G, u].
//
// recurrent_dropout switches Keras's cell to its implementation 1, a mask per gate: gate j reads
// (h_{t-1} * rmask_j) U_j (GRU's candidate: r * ((h_{t-1} * rmask_h) U_h + b_h), reset_after), and
// with dropout the inputs' masks are per gate too, x * mask_j before W_j. Each mask is drawn once per
// sequence and call, kept values scaled by 1 / (1 - rate); GRU's h_t = z h_{t-1} + (1 - z) hh keeps
// the undropped h_{t-1}.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"

namespace kx::core {

enum class CellKind { Lstm, Gru };

struct RecurrentSettings {
  CellKind cell = CellKind::Lstm;
  int64_t units = 0;
  Activation activation = Activation::Tanh;
  Activation recurrent_activation = Activation::Sigmoid;
  bool use_bias = true;
  bool return_sequences = false;
  bool go_backwards = false;
  bool zero_output_for_mask = false;
  bool unit_forget_bias = true;  // LSTM: the forget gate's bias starts at 1 (Keras's default)
  // Keras's dropout of the inputs in training: one mask per sample and feature, the same at every step
  // and for every gate (a mask per gate with recurrent_dropout), kept values scaled by 1 / (1 - rate).
  double dropout = 0;
  // Keras's dropout of the previous state before the recurrent kernel in training: a mask per sample,
  // gate and unit, the same at every step.
  double recurrent_dropout = 0;
  // Keras's initializers (keras_initializer.hpp) from the config; "": Keras's defaults (Glorot-uniform
  // kernel, orthogonal recurrent kernel, zero bias).
  std::string kernel_initializer, recurrent_initializer, bias_initializer;
};

// What a training run draws its input dropout mask from (LayerContext's step_seed, a stream of its
// own per run, the rows' first global row); training false: no dropout (inference).
struct InputDropout {
  bool training = false;
  const uint64_t* step_seed = nullptr;
  uint64_t stream = 0;
  int64_t first_row = 0;
};

// Keras's LSTM or GRU config read into settings; what kx does not do (return_state, stateful, GRU
// without reset_after) is Unsupported naming the setting.
RecurrentSettings read_recurrent_settings(const json::Value& config, CellKind cell, const std::string& what);
// The settings as Keras's config keys (add_config).
void write_recurrent_settings(const RecurrentSettings& s, json::Value& config);

// Where the run writes its output: y of row r, step position p at y + r * row_ld + p * step_ld (the
// last step's only, at y + r * row_ld, without return_sequences). Reversed puts step k at position
// steps - 1 - k (a Bidirectional's backward direction); else step k at position k.
struct SequenceOutput {
  int64_t row_ld = 0, step_ld = 0;
  bool reversed = false;
};

class RecurrentSequence {
 public:
  RecurrentSequence() = default;
  RecurrentSequence(RecurrentSettings s, int64_t steps, int64_t features);

  const RecurrentSettings& settings() const { return s_; }
  int64_t steps() const { return steps_; }
  int64_t features() const { return features_; }
  int64_t gate_width() const { return (s_.cell == CellKind::Lstm ? 4 : 3) * s_.units; }
  // kernel [features, G u], recurrent_kernel [u, G u], bias [G u] (LSTM) or [2, 3 u] (GRU), named
  // `prefix` + "kernel" ... and kept in Keras's files at `keras_group` + "/vars/<i>".
  std::vector<ParamSpec> params(const std::string& prefix, const std::string& keras_group) const;
  int64_t num_params() const;
  int64_t scratch_per_sample() const;
  // Floats forward and backward need for one call: backward's dh and dc.
  int64_t workspace_floats(int64_t rows) const;

  // x [rows, steps, features]; w this run's parameters; mask [rows, steps] or null.
  // With settings().dropout and drop.training, the run reads x times the dropout mask (drawn here, kept
  // in the scratch for backward).
  void forward(backend::Backend& be, int64_t rows, const float* x, const float* w, const float* mask, float* scratch,
               float* workspace, float* y, const SequenceOutput& out, const InputDropout& drop = {}) const;
  // dy as y's layout; dw (may be null) overwritten; dx (may be null) overwritten (dx_beta 0) or added to
  // (dx_beta 1). The scratch's gates are overwritten with their gradients.
  void backward(backend::Backend& be, int64_t rows, const float* x, const float* w, float* dw, const float* mask,
                float* scratch, float* workspace, const float* dy, const SequenceOutput& out, float* dx,
                float dx_beta, const InputDropout& drop = {}) const;

 private:
  // The input position of the k-th step processed, and the output position of its result.
  int64_t position(int64_t k) const { return s_.go_backwards ? steps_ - 1 - k : k; }
  int64_t output_position(int64_t k, const SequenceOutput& out) const { return out.reversed ? steps_ - 1 - k : k; }
  backend::RecurrentStep step_shape(int64_t rows, const SequenceOutput& out) const;
  int64_t state_scratch_per_sample() const;
  int64_t gate_count() const { return s_.cell == CellKind::Lstm ? 4 : 3; }
  // Keras's mask per gate (its implementation 1): with recurrent_dropout.
  bool per_gate() const { return s_.recurrent_dropout > 0; }
  // Per sample: the input mask ([features], or [G, features] per gate), the dropped inputs ([steps,
  // features] or [steps, G, features]) and the state's masks [G, u].
  int64_t input_mask_per_sample() const { return s_.dropout > 0 ? (per_gate() ? gate_count() : 1) * features_ : 0; }
  int64_t dropped_per_sample() const { return steps_ * input_mask_per_sample(); }
  int64_t recurrent_mask_per_sample() const { return per_gate() ? gate_count() * s_.units : 0; }
  float* dropout_mask(float* scratch, int64_t rows) const { return scratch + rows * state_scratch_per_sample(); }
  float* dropped_inputs(float* scratch, int64_t rows) const {
    return dropout_mask(scratch, rows) + rows * input_mask_per_sample();
  }
  float* recurrent_mask(float* scratch, int64_t rows) const {
    return dropped_inputs(scratch, rows) + rows * dropped_per_sample();
  }
  backend::BinaryShape dropout_broadcast() const;
  // x [steps, features] times the masks [G, features]: [steps, G, features].
  backend::BinaryShape per_gate_broadcast() const;
  // h [u] times the state's masks [G, u]: [G, u].
  backend::BinaryShape state_broadcast() const;
  // hm [rows, G, u] = h_prev (row stride steps * u; null: zeros) times the state's masks, through hcopy.
  void masked_state(backend::Backend& be, int64_t rows, const float* h_prev, const float* rmask, float* hcopy,
                    float* hm) const;
  // The inputs' gradient through per-gate masks: into dx (dx_beta 0) or onto it.
  void per_gate_input_grad(backend::Backend& be, int64_t rows, const float* kernel, float* scratch, float* workspace,
                           float* dx, float dx_beta) const;
  RecurrentSettings s_;
  int64_t steps_ = 0, features_ = 0;
};

// Keras's name of an activation a recurrent layer takes (linear, relu, sigmoid, tanh), or
// InvalidArgument naming `what`.
Activation recurrent_activation_from_json(const json::Value& v, const std::string& what);

}  // namespace kx::core
