#include "core/layers/recurrent_sequence.hpp"

#include <algorithm>
#include <cmath>

#include "core/checked_size.hpp"
#include "core/layers/keras_initializer.hpp"
#include "kx/error.hpp"

namespace kx::core {

using backend::Epilogue;
using backend::Trans;

namespace {

// The state's masks draw from a stream of their own beside the inputs' (a Bidirectional's directions
// already differ in theirs).
constexpr uint64_t kRecurrentStream = 0x52d1'7a3c'e90b'4f61ull;

// A rate of dropout: in [0, 1) (Keras drops nothing at 1; kx asks for a rate it can apply).
double rate_of(const json::Value& config, const char* key, const std::string& what) {
  const json::Value* v = config.find(key);
  const double rate = v && !v->is_null() ? v->as_number(what + " " + key) : 0.0;
  require(std::isfinite(rate) && rate >= 0 && rate < 1, Status::InvalidArgument,
          what + ": " + key + " must be in [0, 1), got " + std::to_string(rate));
  return rate;
}

bool flag(const json::Value& config, const char* key, bool fallback, const std::string& what) {
  const json::Value* v = config.find(key);
  return v && !v->is_null() ? v->as_bool(what + " " + key) : fallback;
}

// A setting kx refuses unless it has Keras's default (0 or false).
void require_zero(const json::Value& config, const char* key, const std::string& what) {
  const json::Value* v = config.find(key);
  if (!v || v->is_null()) return;
  const bool zero = v->type() == json::Value::Type::Bool ? !v->as_bool(key) : v->as_number(what + " " + key) == 0;
  require(zero, Status::Unsupported, what + ": " + key + " " + v->dump() + " is not supported (only its default)");
}

}  // namespace

Activation recurrent_activation_from_json(const json::Value& v, const std::string& what) {
  const Activation a = v.is_null() ? Activation::None : activation_from_name(v.as_string(what));
  // The cell kernels (backend/recurrent_math.hpp) compute these; any other would run as linear.
  require(a == Activation::None || a == Activation::Relu || a == Activation::Sigmoid || a == Activation::Tanh,
          Status::Unsupported,
          what + " " + v.dump() + " is not supported in a recurrent layer (linear, relu, sigmoid or tanh)");
  return a;
}

RecurrentSettings read_recurrent_settings(const json::Value& config, CellKind cell, const std::string& what) {
  RecurrentSettings s;
  s.cell = cell;
  const json::Value* units = config.find("units");
  require(units != nullptr, Status::InvalidArgument, what + " needs units");
  const double u = units->as_number(what + " units");
  require(u >= 1 && u <= 1e7 && u == static_cast<double>(static_cast<int64_t>(u)), Status::InvalidArgument,
          what + " units must be a positive integer, got " + units->dump());
  s.units = static_cast<int64_t>(u);
  if (const json::Value* v = config.find("activation")) s.activation = recurrent_activation_from_json(*v, what + " activation");
  if (const json::Value* v = config.find("recurrent_activation"))
    s.recurrent_activation = recurrent_activation_from_json(*v, what + " recurrent_activation");
  s.use_bias = flag(config, "use_bias", true, what);
  s.return_sequences = flag(config, "return_sequences", false, what);
  s.go_backwards = flag(config, "go_backwards", false, what);
  s.zero_output_for_mask = flag(config, "zero_output_for_mask", false, what);
  s.unit_forget_bias = flag(config, "unit_forget_bias", true, what);
  // A layer has one output in kx's graphs: the states cannot be returned beside it.
  require_zero(config, "return_state", what);
  require_zero(config, "stateful", what);
  s.dropout = rate_of(config, "dropout", what);
  s.recurrent_dropout = rate_of(config, "recurrent_dropout", what);
  if (cell == CellKind::Gru)
    require(flag(config, "reset_after", true, what), Status::Unsupported,
            what + ": reset_after false is not supported (Keras 3's default, true, is)");
  s.kernel_initializer = keras_initializer_setting(config, "kernel_initializer", what);
  s.recurrent_initializer = keras_initializer_setting(config, "recurrent_initializer", what);
  s.bias_initializer = keras_initializer_setting(config, "bias_initializer", what);
  return s;
}

void write_recurrent_settings(const RecurrentSettings& s, json::Value& config) {
  config.set("units", s.units);
  config.set("activation", activation_name(s.activation));
  config.set("recurrent_activation", activation_name(s.recurrent_activation));
  config.set("use_bias", s.use_bias);
  config.set("return_sequences", s.return_sequences);
  config.set("return_state", false);
  config.set("go_backwards", s.go_backwards);
  config.set("stateful", false);
  config.set("unroll", false);
  config.set("zero_output_for_mask", s.zero_output_for_mask);
  config.set("dropout", s.dropout);
  config.set("recurrent_dropout", s.recurrent_dropout);
  if (s.cell == CellKind::Lstm) config.set("unit_forget_bias", s.unit_forget_bias);
  if (s.cell == CellKind::Gru) config.set("reset_after", true);
  add_keras_initializer(config, "kernel_initializer", s.kernel_initializer);
  add_keras_initializer(config, "recurrent_initializer", s.recurrent_initializer);
  add_keras_initializer(config, "bias_initializer", s.bias_initializer);
}

RecurrentSequence::RecurrentSequence(RecurrentSettings s, int64_t steps, int64_t features)
    : s_(s), steps_(steps), features_(features) {
  checked_product({features_ + s_.units + 2, gate_width()}, "a recurrent layer's weights");
  checked_product({steps_, gate_width() + 4 * s_.units}, "a recurrent layer's scratch");
}

std::vector<ParamSpec> RecurrentSequence::params(const std::string& prefix, const std::string& keras_group) const {
  const int64_t g = gate_width(), u = s_.units;
  auto at = [&](int i) { return keras_group + "/vars/" + std::to_string(i); };
  // Keras's defaults: a Glorot-uniform kernel, an orthogonal recurrent kernel.
  std::vector<ParamSpec> p{{prefix + "kernel", {features_, g}, Init::GlorotUniform, features_, g, true, {}, at(0)},
                           {prefix + "recurrent_kernel", {u, g}, Init::GlorotUniform, u, g, true, {}, at(1)}};
  p[0].initializer = s_.kernel_initializer;
  p[1].initializer =
      s_.recurrent_initializer.empty() ? R"({"class_name": "Orthogonal", "config": {}})" : s_.recurrent_initializer;
  if (!s_.use_bias) return p;
  const std::string& b = s_.bias_initializer;
  if (s_.cell == CellKind::Gru) {
    p.push_back({prefix + "bias", {2, g}, Init::Zeros, 0, 0, true, {}, at(2)});
  } else if (s_.unit_forget_bias && b.empty()) {  // the forget gate's bias starts at 1
    std::vector<float> bias(static_cast<size_t>(g), 0.0f);
    for (int64_t j = u; j < 2 * u; ++j) bias[static_cast<size_t>(j)] = 1.0f;
    p.push_back({prefix + "bias", {g}, Init::Values, 0, 0, true, std::move(bias), at(2)});
  } else {
    p.push_back({prefix + "bias", {g}, Init::Zeros, 0, 0, true, {}, at(2)});
  }
  // With unit_forget_bias Keras draws the input gate's part, ones for the forget gate, then the rest.
  p[2].initializer = s_.cell == CellKind::Lstm && s_.unit_forget_bias && !b.empty()
                         ? keras_initializer_parts({{b, u}, {R"({"class_name": "Ones", "config": {}})", u}, {b, 2 * u}})
                         : b;
  return p;
}

int64_t RecurrentSequence::num_params() const {
  const int64_t g = gate_width();
  const int64_t bias = s_.use_bias ? (s_.cell == CellKind::Gru ? 2 * g : g) : 0;
  return (features_ + s_.units) * g + bias;
}

int64_t RecurrentSequence::state_scratch_per_sample() const {
  const int64_t second = s_.cell == CellKind::Lstm ? s_.units : gate_width();  // c, or h U + b
  return steps_ * (gate_width() + s_.units + second);
}

int64_t RecurrentSequence::scratch_per_sample() const {
  return state_scratch_per_sample() + input_mask_per_sample() + dropped_per_sample() + recurrent_mask_per_sample();
}

// dh and dc; with recurrent_dropout a copy of h and the masked states [G, u]; then every step's previous
// h (what the recurrent kernel's gradient multiplies) and, with dropout, after it the inputs' gradient
// before the mask.
int64_t RecurrentSequence::workspace_floats(int64_t rows) const {
  const int64_t masked_states = per_gate() ? (gate_count() + 1) * s_.units : 0;
  const int64_t after = std::max(steps_ * s_.units, dropped_per_sample());
  return checked_product({rows, 2 * s_.units + masked_states + after}, "a recurrent layer's workspace");
}

backend::BinaryShape RecurrentSequence::per_gate_broadcast() const {
  backend::BinaryShape b;
  b.op = backend::BinaryOp::Multiply;
  b.rank = 3;
  b.dims[0] = b.a_dims[0] = steps_;
  b.dims[1] = b.b_dims[1] = gate_count();
  b.dims[2] = b.a_dims[2] = b.b_dims[2] = features_;
  b.a_dims[1] = b.b_dims[0] = 1;
  return b;
}

backend::BinaryShape RecurrentSequence::state_broadcast() const {
  backend::BinaryShape b;
  b.op = backend::BinaryOp::Multiply;
  b.rank = 2;
  b.dims[0] = b.b_dims[0] = gate_count();
  b.dims[1] = b.a_dims[1] = b.b_dims[1] = s_.units;
  b.a_dims[0] = 1;
  return b;
}

void RecurrentSequence::masked_state(backend::Backend& be, int64_t rows, const float* h_prev, const float* rmask,
                                     float* hcopy, float* hm) const {
  const int64_t u = s_.units;
  if (h_prev)
    be.copy_columns(rows, u, h_prev, steps_ * u, hcopy, u);
  else
    be.fill_zero(static_cast<size_t>(rows * u) * sizeof(float), hcopy);
  be.binary_forward(state_broadcast(), rows, hcopy, rmask, hm);
}

void RecurrentSequence::per_gate_input_grad(backend::Backend& be, int64_t rows, const float* kernel, float* scratch,
                                            float* workspace, float* dx, float dx_beta) const {
  const int64_t u = s_.units, g = gate_width(), G = gate_count(), T = steps_, F = features_;
  float* gates_grad = scratch;
  float* d_all = workspace + rows * (2 * u + (G + 1) * u);  // [rows, T, G, F]
  float* masked = dropped_inputs(scratch, rows);            // no longer needed: the masked gradient
  for (int64_t j = 0; j < G; ++j)
    be.gemm(Trans::No, Trans::Yes, rows * T, F, u, gates_grad + j * u, g, kernel + j * u, g, 0.0f, d_all + j * F, G * F,
            {});
  backend::BinaryShape through_masks = per_gate_broadcast();  // d_all is [T, G, F] itself
  through_masks.a_dims[1] = gate_count();
  be.binary_forward(through_masks, rows, d_all, dropout_mask(scratch, rows), masked);
  // The gates' sum, in d_all's first rows * T * F floats (a term at a time after them).
  float* sum = d_all;
  float* term = d_all + rows * T * F;
  be.copy_columns(rows * T, F, masked, G * F, sum, F);
  for (int64_t j = 1; j < G; ++j) {
    be.copy_columns(rows * T, F, masked + j * F, G * F, term, F);
    be.add(rows * T * F, sum, term, sum);
  }
  if (dx_beta == 0.0f)
    be.copy(rows * T * F, sum, dx);
  else
    be.add(rows * T * F, dx, sum, dx);
}

backend::BinaryShape RecurrentSequence::dropout_broadcast() const {
  backend::BinaryShape b;
  b.op = backend::BinaryOp::Multiply;
  b.rank = 2;
  b.dims[0] = b.a_dims[0] = steps_;
  b.dims[1] = b.a_dims[1] = b.b_dims[1] = features_;
  b.b_dims[0] = 1;
  return b;
}

backend::RecurrentStep RecurrentSequence::step_shape(int64_t rows, const SequenceOutput& out) const {
  backend::RecurrentStep st;
  st.rows = rows;
  st.units = s_.units;
  st.gates_ld = steps_ * gate_width();
  st.recurrent_ld = steps_ * gate_width();
  st.state_ld = steps_ * s_.units;
  st.mask_ld = steps_;
  st.y_ld = out.row_ld;
  st.activation = s_.activation;
  st.recurrent_activation = s_.recurrent_activation;
  st.zero_masked_output = s_.zero_output_for_mask ? 1 : 0;
  return st;
}

void RecurrentSequence::forward(backend::Backend& be, int64_t rows, const float* x, const float* w, const float* mask,
                                float* scratch, float* workspace, float* y, const SequenceOutput& out,
                                const InputDropout& drop) const {
  const int64_t u = s_.units, g = gate_width(), T = steps_;
  const float* kernel = w;
  const float* recurrent_kernel = w + features_ * g;
  const float* bias = s_.use_bias ? recurrent_kernel + u * g : nullptr;
  float* gates = scratch;
  float* h = gates + rows * T * g;
  float* second = h + rows * T * u;  // c (LSTM) or h U + b (GRU)
  const bool gate_inputs = s_.dropout > 0 && drop.training && per_gate();
  if (s_.dropout > 0 && drop.training) {
    // The masks of each sample's features (Keras draws them once per batch and keeps them for every
    // step); the dropped buffer only serves the draw as its input and output until it is filled.
    const int64_t per_sample = input_mask_per_sample();
    float* dmask = dropout_mask(scratch, rows);
    float* dropped = dropped_inputs(scratch, rows);
    be.dropout_forward(static_cast<float>(s_.dropout), drop.step_seed, drop.stream, drop.first_row * per_sample,
                       rows * per_sample, dropped, dmask, dropped);
    be.binary_forward(gate_inputs ? per_gate_broadcast() : dropout_broadcast(), rows, x, dmask, dropped);
    x = dropped;
  }
  // The inputs' share of every step's gates at once (with the input bias); per gate from its own
  // dropped inputs with recurrent_dropout.
  for (int64_t j = 0; j < (gate_inputs ? gate_count() : 1); ++j) {
    Epilogue in_ep;
    in_ep.bias = bias ? bias + j * u : nullptr;
    const int64_t width = gate_inputs ? u : g, lda = gate_inputs ? gate_count() * features_ : features_;
    be.gemm(Trans::No, Trans::No, rows * T, width, features_, x + j * features_, lda, kernel + j * u, g, 0.0f,
            gates + j * u, g, in_ep);
  }
  const backend::RecurrentStep st = step_shape(rows, out);
  if (s_.cell == CellKind::Gru) be.fill_zero(static_cast<size_t>(rows * u) * sizeof(float), workspace);
  // recurrent_dropout: the state's masks, then per step h_{t-1} times each gate's mask.
  const bool rec = per_gate() && drop.training;
  float* rmask = recurrent_mask(scratch, rows);
  float* hcopy = workspace + 2 * rows * u;
  float* hm = hcopy + rows * u;
  if (rec)
    be.dropout_forward(static_cast<float>(s_.recurrent_dropout), drop.step_seed, drop.stream ^ kRecurrentStream,
                       drop.first_row * gate_count() * u, rows * gate_count() * u, hm, rmask, hm);
  for (int64_t k = 0; k < T; ++k) {
    const int64_t t = position(k), tp = k > 0 ? position(k - 1) : 0;
    float* y_step = s_.return_sequences ? y + output_position(k, out) * out.step_ld : (k == T - 1 ? y : nullptr);
    const float* h_prev = k > 0 ? h + tp * u : nullptr;
    const float* m = mask ? mask + t : nullptr;
    if (rec && (k > 0 || s_.cell == CellKind::Gru)) {
      // Each gate's share of the recurrent product from its masked state (GRU's with the recurrent bias).
      masked_state(be, rows, h_prev, rmask, hcopy, hm);
      for (int64_t j = 0; j < gate_count(); ++j) {
        Epilogue rec_ep;
        const bool gru = s_.cell == CellKind::Gru;
        rec_ep.bias = gru && bias ? bias + g + j * u : nullptr;
        be.gemm(Trans::No, Trans::No, rows, u, u, hm + j * u, gate_count() * u, recurrent_kernel + j * u, g, gru ? 0.0f : 1.0f,
                (gru ? second : gates) + t * g + j * u, T * g, rec_ep);
      }
    }
    if (s_.cell == CellKind::Lstm) {
      if (k > 0 && !rec)
        be.gemm(Trans::No, Trans::No, rows, g, u, h_prev, T * u, recurrent_kernel, g, 1.0f, gates + t * g, T * g, {});
      be.lstm_step_forward(st, gates + t * g, k > 0 ? second + tp * u : nullptr, h_prev, m, second + t * u, h + t * u,
                           y_step);
    } else {
      // h U + the recurrent bias (GRU's reset_after needs it apart from the inputs' share); the first
      // step's h is zero (the workspace).
      Epilogue rec_ep;
      rec_ep.bias = bias ? bias + g : nullptr;
      if (!rec)
        be.gemm(Trans::No, Trans::No, rows, g, u, k > 0 ? h_prev : workspace, k > 0 ? T * u : u, recurrent_kernel, g,
                0.0f, second + t * g, T * g, rec_ep);
      be.gru_step_forward(st, gates + t * g, second + t * g, h_prev, m, h + t * u, y_step);
    }
  }
}

void RecurrentSequence::backward(backend::Backend& be, int64_t rows, const float* x, const float* w, float* dw,
                                 const float* mask, float* scratch, float* workspace, const float* dy,
                                 const SequenceOutput& out, float* dx, float dx_beta, const InputDropout& drop) const {
  const int64_t u = s_.units, g = gate_width(), T = steps_;
  const float* kernel = w;
  const float* recurrent_kernel = w + features_ * g;
  float* gates = scratch;
  const float* h = gates + rows * T * g;
  float* second = gates + rows * T * g + rows * T * u;
  float* dh = workspace;
  float* dc = workspace + rows * u;
  be.fill_zero(static_cast<size_t>(2 * rows * u) * sizeof(float), workspace);
  float* d_recurrent_kernel = dw ? dw + features_ * g : nullptr;
  float* d_bias = dw && s_.use_bias ? d_recurrent_kernel + u * g : nullptr;
  const backend::RecurrentStep st = step_shape(rows, out);
  const bool rec = per_gate() && drop.training;
  const float* rmask = recurrent_mask(scratch, rows);
  float* hcopy = workspace + 2 * rows * u;
  float* hm = hcopy + rows * u;
  bool recurrent_written = false;  // with recurrent_dropout, dU is summed per step
  for (int64_t k = T; k-- > 0;) {
    const int64_t t = position(k), tp = k > 0 ? position(k - 1) : 0;
    const float* dy_step =
        s_.return_sequences ? dy + output_position(k, out) * out.step_ld : (k == T - 1 ? dy : nullptr);
    const float* h_prev = k > 0 ? h + tp * u : nullptr;
    const float* m = mask ? mask + t : nullptr;
    float* d_step;  // what the recurrent kernel multiplied: the gates (LSTM) or h U + b (GRU)
    if (s_.cell == CellKind::Lstm) {
      be.lstm_step_backward(st, gates + t * g, k > 0 ? second + tp * u : nullptr, second + t * u, m, dy_step, dh, dc);
      d_step = gates + t * g;
    } else {
      be.gru_step_backward(st, gates + t * g, second + t * g, h_prev, m, dy_step, dh);
      d_step = second + t * g;
    }
    if (k == 0) break;  // the first step's h_prev is zero: nothing flows through the recurrent kernel
    if (rec) {
      // Per gate: dU_j += (h_{t-1} rmask_j)^T d_j; dh += (d_j U_j^T) rmask_j.
      const int64_t G = gate_count();
      if (d_recurrent_kernel) {
        masked_state(be, rows, h_prev, rmask, hcopy, hm);
        for (int64_t j = 0; j < G; ++j)
          be.gemm(Trans::Yes, Trans::No, u, u, rows, hm + j * u, G * u, d_step + j * u, T * g,
                  recurrent_written ? 1.0f : 0.0f, d_recurrent_kernel + j * u, g, {});
        recurrent_written = true;
      }
      for (int64_t j = 0; j < G; ++j)
        be.gemm(Trans::No, Trans::Yes, rows, u, u, d_step + j * u, T * g, recurrent_kernel + j * u, g, 0.0f, hm + j * u,
                G * u, {});
      be.multiply(rows * G * u, hm, rmask, hm);
      for (int64_t j = 0; j < G; ++j) {
        be.copy_columns(rows, u, hm + j * u, G * u, hcopy, u);
        be.add(rows * u, dh, hcopy, dh);
      }
      continue;
    }
    be.gemm(Trans::No, Trans::Yes, rows, u, g, d_step, T * g, recurrent_kernel, g, 1.0f, dh, u, {});
  }
  const bool dropped = s_.dropout > 0 && drop.training;
  const bool gate_inputs = dropped && per_gate();
  if (dropped) x = dropped_inputs(scratch, rows);
  if (dw) {
    if (rec) {
      if (!recurrent_written) be.fill_zero(static_cast<size_t>(u * g) * sizeof(float), d_recurrent_kernel);
    } else {
      // The recurrent kernel's gradient, sum over steps of h_prev^T d_step, as one product over every
      // (row, step): each position's previous h lined up with it (zero for the first step processed).
      float* h_before = workspace + 2 * rows * u + (per_gate() ? rows * (gate_count() + 1) * u : 0);
      be.fill_zero(static_cast<size_t>(rows * T * u) * sizeof(float), h_before);
      if (T > 1) {
        if (s_.go_backwards)  // position t follows position t + 1
          be.copy_columns(rows, (T - 1) * u, h + u, T * u, h_before, T * u);
        else
          be.copy_columns(rows, (T - 1) * u, h, T * u, h_before + u, T * u);
      }
      be.gemm(Trans::Yes, Trans::No, u, g, rows * T, h_before, u, s_.cell == CellKind::Lstm ? gates : second, g, 0.0f,
              d_recurrent_kernel, g, {});
    }
    if (gate_inputs) {  // each gate's kernel from its own dropped inputs
      for (int64_t j = 0; j < gate_count(); ++j)
        be.gemm(Trans::Yes, Trans::No, features_, u, rows * T, x + j * features_, gate_count() * features_, gates + j * u, g,
                0.0f, dw + j * u, g, {});
      if (d_bias) be.bias_grad(rows * T, g, gates, d_bias);
    } else {
      Epilogue with_bias_grad;
      with_bias_grad.bias_grad = d_bias;
      be.gemm(Trans::Yes, Trans::No, features_, g, rows * T, x, features_, gates, g, 0.0f, dw, g, with_bias_grad);
    }
    if (d_bias && s_.cell == CellKind::Gru) be.bias_grad(rows * T, g, second, d_bias + g);
  }
  if (!dx) return;
  if (gate_inputs) return per_gate_input_grad(be, rows, kernel, scratch, workspace, dx, dx_beta);
  if (!dropped) {
    be.gemm(Trans::No, Trans::Yes, rows * T, features_, g, gates, g, kernel, g, dx_beta, dx, features_, {});
    return;
  }
  // Through the mask: the gradient of the dropped inputs times the mask, into the dropped inputs'
  // buffer (no longer needed), then onto dx.
  float* d_dropped = workspace + 2 * rows * u + (per_gate() ? rows * (gate_count() + 1) * u : 0);
  float* masked = dropped_inputs(scratch, rows);
  be.gemm(Trans::No, Trans::Yes, rows * T, features_, g, gates, g, kernel, g, 0.0f, d_dropped, features_, {});
  be.binary_forward(dropout_broadcast(), rows, d_dropped, dropout_mask(scratch, rows), masked);
  if (dx_beta == 0.0f)
    be.copy(rows * T * features_, masked, dx);
  else
    be.add(rows * T * features_, dx, masked, dx);
}

}  // namespace kx::core
