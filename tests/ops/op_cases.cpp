#include "ops/op_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string_view>
#include <utility>

#include "ops/op_case_setups.hpp"
#include "reference.hpp"

namespace kx::test::ops {
namespace {

using backend::Op;

// Tolerances across backends: data movement and formulas both compile from one header are exact;
// float32 arithmetic that a GPU may order or fuse differently is not.
constexpr double kExact = 0;
constexpr double kElementwise = 1e-6;
constexpr double kReduction = 1e-5;

// One row per operation of KX_BACKEND_KERNELS, in its order. A new operation fails the static_asserts
// below until its row (and its setup_<name> in op_cases_*.cpp) is here.
constexpr OpCase kOpCases[] = {
    {Op::fill_zero, "fill_zero", kExact, setup_fill_zero},
    {Op::gemm, "gemm", kReduction, setup_gemm},
    {Op::gemm_batched, "gemm_batched", kReduction, setup_gemm_batched},
    {Op::activation_forward, "activation_forward", kReduction, setup_activation_forward},
    {Op::activation_backward, "activation_backward", kReduction, setup_activation_backward},
    {Op::bias_grad, "bias_grad", kReduction, setup_bias_grad},
    {Op::bias_add, "bias_add", kExact, setup_bias_add},
    {Op::loss, "loss", kReduction, setup_loss},
    {Op::im2col, "im2col", kExact, setup_im2col},
    {Op::col2im, "col2im", kReduction, setup_col2im},
    {Op::conv2d_forward, "conv2d_forward", kReduction, setup_conv2d_forward},
    {Op::conv2d_backward, "conv2d_backward", kReduction, setup_conv2d_backward},
    {Op::depthwise_conv2d_forward, "depthwise_conv2d_forward", kExact, setup_depthwise_conv2d_forward},
    {Op::depthwise_conv2d_backward, "depthwise_conv2d_backward", kReduction, setup_depthwise_conv2d_backward},
    {Op::max_pool_forward, "max_pool_forward", kExact, setup_max_pool_forward},
    {Op::max_pool_backward, "max_pool_backward", kReduction, setup_max_pool_backward},
    {Op::avg_pool_forward, "avg_pool_forward", kReduction, setup_avg_pool_forward},
    {Op::avg_pool_backward, "avg_pool_backward", kReduction, setup_avg_pool_backward},
    {Op::upsample2d_forward, "upsample2d_forward", kExact, setup_upsample2d_forward},
    {Op::upsample2d_backward, "upsample2d_backward", kExact, setup_upsample2d_backward},
    {Op::column_moments, "column_moments", kReduction, setup_column_moments},
    {Op::batch_norm_apply, "batch_norm_apply", kReduction, setup_batch_norm_apply},
    {Op::batch_norm_backward, "batch_norm_backward", kReduction, setup_batch_norm_backward},
    {Op::layer_norm_forward, "layer_norm_forward", kReduction, setup_layer_norm_forward},
    {Op::layer_norm_backward, "layer_norm_backward", kReduction, setup_layer_norm_backward},
    {Op::causal_mask_add, "causal_mask_add", kExact, setup_causal_mask_add},
    {Op::attention_mask_fill, "attention_mask_fill", kExact, setup_attention_mask_fill},
    {Op::dropout_forward, "dropout_forward", kElementwise, setup_dropout_forward},
    {Op::relu_general_forward, "relu_general_forward", kExact, setup_relu_general_forward},
    {Op::relu_general_backward, "relu_general_backward", kExact, setup_relu_general_backward},
    {Op::pointwise_activation_forward, "pointwise_activation_forward", kReduction, setup_pointwise_activation_forward},
    {Op::pointwise_activation_backward, "pointwise_activation_backward", kReduction,
     setup_pointwise_activation_backward},
    {Op::binary_forward, "binary_forward", kExact, setup_binary_forward},
    {Op::binary_backward, "binary_backward", kReduction, setup_binary_backward},
    {Op::scale_shift, "scale_shift", kExact, setup_scale_shift},
    {Op::multiply, "multiply", kExact, setup_multiply},
    {Op::copy, "copy", kExact, setup_copy},
    {Op::add, "add", kExact, setup_add},
    {Op::scaled_difference, "scaled_difference", kElementwise, setup_scaled_difference},
    {Op::copy_columns, "copy_columns", kExact, setup_copy_columns},
    {Op::sgd_update, "sgd_update", kElementwise, setup_sgd_update},
    {Op::adam_update, "adam_update", kElementwise, setup_adam_update},
    {Op::adamw_update, "adamw_update", kElementwise, setup_adamw_update},
    {Op::rmsprop_update, "rmsprop_update", kElementwise, setup_rmsprop_update},
    {Op::gather_rows, "gather_rows", kExact, setup_gather_rows},
    {Op::embedding_forward, "embedding_forward", kExact, setup_embedding_forward},
    {Op::embedding_backward, "embedding_backward", kExact, setup_embedding_backward},
    {Op::masking_forward, "masking_forward", kExact, setup_masking_forward},
    {Op::masking_backward, "masking_backward", kExact, setup_masking_backward},
    {Op::lstm_step_forward, "lstm_step_forward", kReduction, setup_lstm_step_forward},
    {Op::lstm_step_backward, "lstm_step_backward", kReduction, setup_lstm_step_backward},
    {Op::gru_step_forward, "gru_step_forward", kReduction, setup_gru_step_forward},
    {Op::gru_step_backward, "gru_step_backward", kReduction, setup_gru_step_backward},
    {Op::round_to, "round_to", kExact, setup_round_to},
    {Op::multiply_by, "multiply_by", kExact, setup_multiply_by},
    {Op::loss_scale_check, "loss_scale_check", kExact, setup_loss_scale_check},
    {Op::loss_scale_update, "loss_scale_update", kExact, setup_loss_scale_update},
};

// The operations as backend_ops.hpp lists them: how many, and their names in Op order.
#define KX_COUNT_OP(name, params, args) +1
constexpr size_t kOpCount = 0 KX_BACKEND_KERNELS(KX_COUNT_OP);
#undef KX_COUNT_OP
#define KX_OP_NAME(name, params, args) std::string_view(#name),
constexpr std::string_view kOpNames[] = {KX_BACKEND_KERNELS(KX_OP_NAME)};
#undef KX_OP_NAME

constexpr bool rows_in_op_order() {
  for (size_t i = 0; i < std::size(kOpCases); ++i)
    if (static_cast<size_t>(kOpCases[i].op) != i) return false;
  return true;
}
constexpr bool rows_named_as_their_op() {
  for (size_t i = 0; i < std::size(kOpCases); ++i)
    if (kOpNames[i] != kOpCases[i].name) return false;
  return true;
}
// Each row names its setup function (declared for every op, so a missing one fails at link time); a
// null check of it here would not be a constant expression under the sanitizers' GCC.
constexpr bool rows_complete() {
  for (const OpCase& c : kOpCases)
    if (!(c.tolerance >= 0)) return false;
  return true;
}

static_assert(std::size(kOpCases) == kOpCount,
              "kOpCases needs exactly one row per operation of KX_BACKEND_KERNELS (backend_ops.hpp)");
static_assert(rows_in_op_order(), "kOpCases lists the operations in Op's order");
static_assert(rows_named_as_their_op(), "each row of kOpCases is named as its operation in backend_ops.hpp");
static_assert(rows_complete(), "each row of kOpCases has a tolerance >= 0");

std::string float_text(float v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

// Where two float buffers differ beyond tol (tol 0: in their bits), or "".
std::string float_difference(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same_bits = std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
    const double a = got[i], b = want[i];
    if (same_bits || (tol > 0 && std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)))) continue;
    if (bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(want.size()) + " values differ, first [" +
         std::to_string(first) + "]: " + float_text(got[first]) + " vs " + float_text(want[first]);
}

bool sums_agree(double got, double want, double tol) {
  return got == want || (tol > 0 && std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)));
}

}  // namespace

std::span<const OpCase> op_cases() { return kOpCases; }

std::vector<float> OpIo::random(size_t n, float lo, float hi) {
  return random_floats(n, static_cast<uint32_t>(gen_()), lo, hi);
}

void* OpIo::upload(const void* data, size_t bytes) {
  buffers_.push_back(be_.allocate(std::max<size_t>(bytes, 1)));  // never empty: an empty buffer has no address
  if (bytes) be_.to_device(data, bytes, buffers_.back().data<void>());
  return buffers_.back().data<void>();
}

void* OpIo::track(std::string name, bool floats, Check check, const void* data, size_t bytes) {
  void* device = upload(data, bytes);
  const auto* first = static_cast<const std::byte*>(data);
  tracked_.push_back({Compared{std::move(name), floats, check, std::vector<std::byte>(first, first + bytes), {}},
                      device});
  return device;
}

float* OpIo::out(std::string name, size_t n, Check check) {
  const std::vector<float> zeros(n);
  return static_cast<float*>(track(std::move(name), true, check, zeros.data(), n * sizeof(float)));
}

float* OpIo::inout(std::string name, const std::vector<float>& values, Check check) {
  return static_cast<float*>(track(std::move(name), true, check, values.data(), values.size() * sizeof(float)));
}

float* OpIo::scratch(size_t n) { return in(std::vector<float>(n)); }

bool OpIo::native(const backend::OpQuery& q) {
  const bool yes = be_.supports(q);
  used_reference_ = used_reference_ || !yes;
  return yes;
}

std::vector<Compared> OpIo::read() {
  std::vector<Compared> now;
  for (const Tracked& t : tracked_) {
    Compared c = t.initial;
    c.after.resize(c.before.size());
    be_.to_host(t.device, c.after.size(), c.after.data());
    now.push_back(std::move(c));
  }
  return now;
}

OpResult OpIo::finish() {
  OpResult r;
  r.buffers = read();
  r.loss_sums = be_.take_loss_sums();
  r.used_reference = used_reference_;
  return r;
}

std::string compare_results(const OpCase& c, const OpResult& got, const OpResult& want, bool exact) {
  std::string problems;
  const auto note = [&](const std::string& what) { problems += what + "\n"; };
  if (got.buffers.size() != want.buffers.size()) {
    note("compared buffers: " + std::to_string(got.buffers.size()) + " vs " + std::to_string(want.buffers.size()));
    return problems;
  }
  for (size_t i = 0; i < want.buffers.size(); ++i) {
    const Compared &g = got.buffers[i], &w = want.buffers[i];
    if (g.name != w.name || g.after.size() != w.after.size() || g.floats != w.floats) {
      note("buffer " + std::to_string(i) + ": " + g.name + " vs " + w.name + " (another layout)");
      continue;
    }
    if (!w.floats || exact) {
      if (g.after != w.after) note(w.name + ": " + (w.floats ? float_difference(g.values_after(), w.values_after(), 0)
                                                             : std::string("the bytes differ")));
      continue;
    }
    const double tol = w.check.tolerance >= 0 ? w.check.tolerance : c.tolerance;
    if (std::string d = float_difference(g.values_after(), w.values_after(), tol); !d.empty()) note(w.name + ": " + d);
  }
  const backend::LossSums &gs = got.loss_sums, &ws = want.loss_sums;
  const double tol = exact ? 0 : c.tolerance;
  if (!sums_agree(gs.loss, ws.loss, tol) || !sums_agree(gs.correct, ws.correct, tol) ||
      !sums_agree(gs.weight, ws.weight, tol)) {
    std::ostringstream s;
    s.precision(17);
    s << "loss sums (loss, correct, weight): " << gs.loss << ", " << gs.correct << ", " << gs.weight << " vs "
      << ws.loss << ", " << ws.correct << ", " << ws.weight;
    note(s.str());
  }
  return problems;
}

std::string sanity_problems(const OpCase& c, const OpResult& r) {
  std::string problems;
  const auto note = [&](const std::string& what) { problems += what + "\n"; };
  if (r.buffers.empty()) note("the case compares no buffer");
  for (const Compared& b : r.buffers) {
    if (b.floats && b.check.finite) {
      const std::vector<float> v = b.values_after();
      const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
      if (bad != v.end())
        note(b.name + ": [" + std::to_string(bad - v.begin()) + "] = " + float_text(*bad) + " is not finite");
    }
    const bool changed = b.after != b.before;
    if (b.check.written && !changed)
      note(b.name + (b.before == std::vector<std::byte>(b.before.size()) ? ": all zero, the op wrote nothing"
                                                                          : ": as uploaded, the op wrote nothing"));
    if (!b.check.written && changed) note(b.name + ": changed, where the op must leave it as it was");
  }
  const backend::LossSums& s = r.loss_sums;
  if (c.op == Op::loss) {
    if (!(s.weight > 0 && s.loss > 0 && std::isfinite(s.loss) && s.correct >= 0 && s.correct <= s.weight))
      note("loss sums: loss " + std::to_string(s.loss) + ", correct " + std::to_string(s.correct) + ", weight " +
           std::to_string(s.weight) + " (want a positive weighted loss and 0 <= correct <= weight)");
  } else if (s.loss != 0 || s.correct != 0 || s.weight != 0) {
    note("loss sums changed by an operation that is not the loss");
  }
  return problems;
}

std::string changes_since_upload(const std::vector<Compared>& now) {
  std::string changed;
  for (const Compared& b : now)
    if (b.after != b.before) changed += b.name + " changed\n";
  return changed;
}

uint32_t fresh_seed() {
  if (const char* s = std::getenv("KX_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

}  // namespace kx::test::ops
