// The cases of the sequence layers' kernels: the embedding lookup and its gradient (repeated ids, the
// mask of id 0), Masking's mask and its gradient (positions all mask_value, a NaN), and one LSTM and
// GRU step forward and backward, with and without a mask, the first step (no previous state) and a
// later one, on strided slices of a sequence as the layers pass them.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/op_case_setups.hpp"

namespace kx::test::ops {

using backend::Backend;
using backend::RecurrentStep;

namespace {

// Ids in [0, vocab) as floats, with 0 and a repeat among them.
std::vector<float> random_ids(OpIo& io, int64_t n, int64_t vocab) {
  std::vector<float> ids(count(n));
  for (float& id : ids) id = static_cast<float>(io.random_index(vocab));
  ids[0] = 0.0f;
  ids[3] = ids[1];
  return ids;
}

// rows of a sequence of `steps` steps, one step's slice read in place; every other row masked.
RecurrentStep step_of(int64_t rows, int64_t units, int64_t gates, int64_t steps, bool zero_masked) {
  RecurrentStep s;
  s.rows = rows, s.units = units;
  s.gates_ld = steps * gates * units;
  s.recurrent_ld = gates * units;
  s.state_ld = steps * units;
  s.mask_ld = steps;
  s.y_ld = units;
  s.zero_masked_output = zero_masked ? 1 : 0;
  return s;
}

std::vector<float> alternate_mask(int64_t rows, int64_t steps) {
  std::vector<float> m(count(rows * steps), 1.0f);
  for (int64_t r = 1; r < rows; r += 2) m[count(r * steps)] = 0.0f;
  return m;
}

}  // namespace

OpCall setup_embedding_forward(OpIo& io) {
  const int64_t vocab = 9, dim = 5, n = 14;
  const float* table = io.in(io.random(count(vocab * dim)));
  const float* ids = io.in(random_ids(io, n, vocab));
  float* y = io.out("y", count(n * dim));
  float* mask = io.out("mask", count(n));
  float* y_no_mask = io.out("y without mask", count(n * dim));
  return [=](Backend& be) {
    be.embedding_forward(n, vocab, dim, ids, table, y, mask);
    be.embedding_forward(n, vocab, dim, ids, table, y_no_mask, nullptr);
  };
}

OpCall setup_embedding_backward(OpIo& io) {
  const int64_t vocab = 7, dim = 6, n = 20;
  const float* ids = io.in(random_ids(io, n, vocab));
  const float* dy = io.in(io.random(count(n * dim)));
  float* dtable = io.inout("dtable", io.random(count(vocab * dim)));
  return [=](Backend& be) { be.embedding_backward(n, vocab, dim, ids, dy, dtable); };
}

// Positions of Masking's input: some entirely mask_value (masked), one with a single other value, one
// with a NaN (kept, as NaN != mask_value).
OpCall setup_masking_forward(OpIo& io) {
  const int64_t positions = 12, features = 5;
  const float mask_value = 0.5f;
  std::vector<float> x = io.random(count(positions * features));
  for (int64_t p : {1, 4, 5, 9}) std::fill_n(x.begin() + p * features, features, mask_value);
  std::fill_n(x.begin() + 7 * features, features, mask_value);
  x[count(7 * features + 2)] = -1.0f;
  std::fill_n(x.begin() + 10 * features, features, mask_value);
  x[count(10 * features + 4)] = std::numeric_limits<float>::quiet_NaN();
  const float* in = io.in(x);
  float* y = io.out("y", count(positions * features), {.finite = false});
  float* mask = io.out("mask", count(positions));
  return [=](Backend& be) { be.masking_forward(positions, features, mask_value, in, y, mask); };
}

OpCall setup_masking_backward(OpIo& io) {
  const int64_t positions = 9, features = 4;
  std::vector<float> mask(count(positions), 1.0f);
  for (int64_t p : {0, 3, 4, 8}) mask[count(p)] = 0.0f;
  const float* m = io.in(mask);
  const float* dy = io.in(io.random(count(positions * features)));
  float* dx = io.out("dx", count(positions * features));
  // In place too, as a layer may overwrite dy.
  float* dy_dx = io.inout("dy as dx", io.random(count(positions * features)));
  return [=](Backend& be) {
    be.masking_backward(positions, features, m, dy, dx);
    be.masking_backward(positions, features, m, dy_dx, dy_dx);
  };
}

OpCall setup_lstm_step_forward(OpIo& io) {
  const int64_t rows = 6, units = 5, steps = 3;
  std::vector<OpCall> calls;
  for (const bool masked : {false, true}) {
    const RecurrentStep s = step_of(rows, units, 4, steps, masked);
    const std::string tag = masked ? " masked" : "";
    float* gates = io.inout("gates" + tag, io.random(count(rows * steps * 4 * units), -3.0f, 3.0f));
    const float* prev = io.in(io.random(count(rows * steps * units)));
    const float* mask = masked ? io.in(alternate_mask(rows, steps)) : nullptr;
    float* c = io.out("c" + tag, count(rows * steps * units));
    float* h = io.out("h" + tag, count(rows * steps * units));
    float* y = io.out("y" + tag, count(rows * units));
    // A later step (previous c and h given) on the second slice; the first step has none.
    const int64_t at = 4 * units, state = units;
    calls.push_back([=](Backend& be) {
      be.lstm_step_forward(s, gates, nullptr, nullptr, mask, c, h, nullptr);
      be.lstm_step_forward(s, gates + at, prev, prev + 1, mask ? mask + 1 : nullptr, c + state, h + state, y);
    });
  }
  return in_order(std::move(calls));
}

OpCall setup_lstm_step_backward(OpIo& io) {
  const int64_t rows = 6, units = 5, steps = 2;
  std::vector<OpCall> calls;
  for (const bool masked : {false, true}) {
    RecurrentStep s = step_of(rows, units, 4, steps, masked);
    s.activation = masked ? Activation::Relu : Activation::Tanh;
    const std::string tag = masked ? " masked" : "";
    float* gates = io.inout("gates" + tag, io.random(count(rows * steps * 4 * units), 0.05f, 0.95f));
    const float* c_prev = io.in(io.random(count(rows * steps * units)));
    const float* c = io.in(io.random(count(rows * steps * units)));
    const float* mask = masked ? io.in(alternate_mask(rows, steps)) : nullptr;
    const float* dy = io.in(io.random(count(rows * units)));
    float* dh = io.inout("dh" + tag, io.random(count(rows * units)));
    float* dc = io.inout("dc" + tag, io.random(count(rows * units)));
    calls.push_back([=](Backend& be) {
      be.lstm_step_backward(s, gates + 4 * units, c_prev, c, mask, dy, dh, dc);
      be.lstm_step_backward(s, gates, nullptr, c, mask, nullptr, dh, dc);
    });
  }
  return in_order(std::move(calls));
}

OpCall setup_gru_step_forward(OpIo& io) {
  const int64_t rows = 5, units = 4, steps = 3;
  std::vector<OpCall> calls;
  for (const bool masked : {false, true}) {
    const RecurrentStep s = step_of(rows, units, 3, steps, masked);
    const std::string tag = masked ? " masked" : "";
    float* gates = io.inout("gates" + tag, io.random(count(rows * steps * 3 * units), -3.0f, 3.0f));
    const float* recurrent = io.in(io.random(count(rows * 3 * units)));
    const float* prev = io.in(io.random(count(rows * steps * units)));
    const float* mask = masked ? io.in(alternate_mask(rows, steps)) : nullptr;
    float* h = io.out("h" + tag, count(rows * steps * units));
    float* y = io.out("y" + tag, count(rows * units));
    calls.push_back([=](Backend& be) {
      be.gru_step_forward(s, gates, recurrent, nullptr, mask, h, nullptr);
      be.gru_step_forward(s, gates + 3 * units, recurrent, prev, mask ? mask + 1 : nullptr, h + units, y);
    });
  }
  return in_order(std::move(calls));
}

OpCall setup_gru_step_backward(OpIo& io) {
  const int64_t rows = 5, units = 4, steps = 2;
  std::vector<OpCall> calls;
  for (const bool masked : {false, true}) {
    const RecurrentStep s = step_of(rows, units, 3, steps, masked);
    const std::string tag = masked ? " masked" : "";
    float* gates = io.inout("gates" + tag, io.random(count(rows * steps * 3 * units), 0.05f, 0.95f));
    float* recurrent = io.inout("recurrent" + tag, io.random(count(rows * 3 * units)));
    const float* h_prev = io.in(io.random(count(rows * steps * units)));
    const float* mask = masked ? io.in(alternate_mask(rows, steps)) : nullptr;
    const float* dy = io.in(io.random(count(rows * units)));
    float* dh = io.inout("dh" + tag, io.random(count(rows * units)));
    calls.push_back([=](Backend& be) {
      be.gru_step_backward(s, gates + 3 * units, recurrent, h_prev, mask, dy, dh);
      be.gru_step_backward(s, gates, recurrent, nullptr, mask, nullptr, dh);
    });
  }
  return in_order(std::move(calls));
}

}  // namespace kx::test::ops
