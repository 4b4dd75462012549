#include "core/train/step_plan.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "config/test_hooks.hpp"
#include "core/checked_size.hpp"

namespace kx::core {

void StepPlan::reserve(backend::Backend& be, const Network& net, int64_t max_rows, int64_t label_size) {
  if (max_rows <= capacity_ && label_size == label_size_ && revision_ == net.revision) return;
  const size_t L = net.layers.size(), T = L + 1;
  arena_ = {};
  scratch_storage_.clear();
  ++generation_;
  capacity_ = 0;  // until every buffer is allocated: an allocation failure leaves an empty plan
  const bool reuse = !config::test_hooks().no_arena_reuse;
  const ArenaLayout layout = plan_step_arena(be, net, max_rows, reuse);
  arena_ = be.allocate(static_cast<size_t>(layout.arena_floats) * sizeof(float));
  config::test_hooks().training_arena_bytes = static_cast<int64_t>(arena_.bytes());
  if (!reuse) {
    // Buffers apart never see another's values: NaN everywhere shows a read before a write.
    const std::vector<float> nan(size_t{1} << 16, std::numeric_limits<float>::quiet_NaN());
    for (int64_t at = 0; at < layout.arena_floats; at += static_cast<int64_t>(nan.size())) {
      const int64_t n = std::min<int64_t>(layout.arena_floats - at, static_cast<int64_t>(nan.size()));
      be.to_device(nan.data(), static_cast<size_t>(n) * sizeof(float), arena_.data() + at);
    }
    be.synchronize();  // nan is gone after this scope
  }
  auto at = [&](int64_t offset) { return offset == ArenaLayout::kNone ? nullptr : arena_.data() + offset; };
  act_.assign(T, nullptr);
  grad_.assign(T, nullptr);
  for (size_t t = 0; t < T; ++t) {
    act_[t] = at(layout.act[t]);
    grad_[t] = at(layout.grad[t]);
  }
  edge_grad_.assign(L, {});
  sums_after_.assign(L, {});
  scratch_.assign(L, nullptr);
  forward_workspace_.assign(L, nullptr);
  backward_workspace_.assign(L, nullptr);
  dead_after_forward_.assign(L, {});
  dead_after_backward_.assign(L, {});
  for (size_t i = 0; i < L; ++i) {
    for (int64_t e : layout.edge_grad[i]) edge_grad_[i].push_back(at(e));
    for (const ArenaLayout::PendingSum& p : layout.sums_after[i]) sums_after_[i].push_back({p.tensor, at(p.extra)});
    forward_workspace_[i] = at(layout.forward_workspace[i]);
    if (config::test_hooks().zero_dead_buffers) {
      for (const ArenaLayout::Span& d : layout.dead_after_forward[i])
        dead_after_forward_[i].push_back({at(d.offset), static_cast<size_t>(d.floats) * sizeof(float)});
      for (const ArenaLayout::Span& d : layout.dead_after_backward[i])
        dead_after_backward_[i].push_back({at(d.offset), static_cast<size_t>(d.floats) * sizeof(float)});
    }
    backward_workspace_[i] = at(layout.backward_workspace[i]);
    // Scratch stays apart and zeroed: layers read zeros they never write there (a frozen mean).
    if (const int64_t n = layout.scratch[i]; n > 0) {
      scratch_storage_.push_back(be.allocate(static_cast<size_t>(n) * sizeof(float)));
      scratch_[i] = scratch_storage_.back().data();
    }
  }
  // Each layer's input masks: in the scratch of the layer that computes them (Network::mask_source).
  masks_.assign(L, {});
  for (size_t i = 0; i < L; ++i)
    for (int t : net.inputs[i]) {
      const int source = net.mask_source[static_cast<size_t>(t)];
      masks_[i].push_back(source > 0 ? scratch_[static_cast<size_t>(source - 1)] : nullptr);
    }
  const int out_mask = net.mask_source.back();
  output_mask_ = out_mask > 0 ? scratch_[static_cast<size_t>(out_mask - 1)] : nullptr;
  mask_weights_ = {};
  mask_counts_ = {};
  if (output_mask_) {
    mask_weights_ = be.allocate(static_cast<size_t>(max_rows * net.output_mask_steps()) * sizeof(float));
    mask_counts_ = be.allocate(4 * sizeof(float));
    be.fill_zero(mask_counts_.bytes(), mask_counts_.data());  // no batch counted yet
  }
  labels_ = be.allocate(static_cast<size_t>(checked_product({max_rows, label_size}, "a batch's labels")) * sizeof(float));
  batch_index_ = be.allocate(static_cast<size_t>(max_rows) * sizeof(int64_t));
  weights_ = be.allocate(static_cast<size_t>(max_rows) * sizeof(float));
  capacity_ = max_rows;
  label_size_ = label_size;
  revision_ = net.revision;
}

int64_t StepPlan::batch_bytes(int64_t rows, int64_t label_size) {
  // Labels and a weight per row (floats), and an index (two floats' bytes).
  return checked_product({rows, label_size + 3, static_cast<int64_t>(sizeof(float))}, "a batch's labels");
}

const float* StepPlan::layer_params(const Network& net, size_t i, const float* params, const PassPrecision& mp) {
  const bool rounded = mp.rounded_params && net.layers[i]->autocasts_weights();
  return (rounded ? mp.rounded_params : params) + net.param_offset[i];
}

float* StepPlan::shared_moments(const Network& net, size_t i, bool training) const {
  const int j = net.moments_reader_of(i);
  if (!training || j < 0 || !net.layers[static_cast<size_t>(j)]->trainable()) return nullptr;
  return scratch_[static_cast<size_t>(j)];  // BatchNormalization's scratch: mean, then variance
}

void StepPlan::forward(backend::Backend& be, const Network& net, const float* params, int64_t rows, bool training,
                       const uint64_t* step_seed, int64_t first_row, const PassPrecision& mp) {
  const size_t L = net.layers.size();
  const bool mixed = mp.rounding != backend::Rounding::None;
  // Keras casts the model's input to the compute type as the first layer reads it, unless that layer
  // reads integer ids (an Embedding).
  bool integer_input = false;
  for (size_t i = 0; i < L; ++i)
    for (int t : net.inputs[i]) integer_input = integer_input || (t == 0 && net.layers[i]->reads_integer_input());
  if (mixed && !integer_input) be.round_to(mp.rounding, rows * net.input_size(), act_[0], act_[0]);
  std::vector<const float*> xs;
  for (size_t i = 0; i < L; ++i) {
    if (net.is_absorbed(i)) {  // the layer before applied it, or the layer after adds it
      zero(be, dead_after_forward_[i]);
      continue;
    }
    const Layer& layer = *net.layers[i];
    xs.clear();
    for (int t : net.inputs[i]) xs.push_back(act_[static_cast<size_t>(t)]);
    LayerContext c;
    c.be = &be;
    c.rows = rows;
    c.x = xs.front();
    c.xs = xs.data();
    c.y = act_[i + 1];
    c.w = layer_params(net, i, params, mp);
    c.scratch = scratch_[i];
    c.workspace = forward_workspace_[i];
    c.fused_activation = net.fused_activation_of(i);
    c.input_padding = net.input_padding_of(i);
    c.output_moments = shared_moments(net, i, training);
    const int source = net.inputs[i].size() == 1 ? net.inputs[i][0] : 0;  // a BatchNormalization's input
    c.moments_given = source > 0 && net.moments_reader_of(static_cast<size_t>(source - 1)) == static_cast<int>(i) &&
                      shared_moments(net, static_cast<size_t>(source - 1), training);
    c.training = training;
    c.fold_activation = net.fold_output_activation && i + 1 == L;
    c.step_seed = step_seed;
    c.seed_stream = i;
    c.first_row = first_row;
    c.rounding = mp.rounding;
    c.masks = masks_[i].data();
    c.mask = masks_[i].front();
    layer.forward(c);
    if (mixed && !layer.aliases_input() && !layer.rounds_output(c.fold_activation))
      be.round_to(mp.rounding, rows * num_elements(net.shapes[i + 1]), c.y, c.y);
    zero(be, dead_after_forward_[i]);
  }
}

void StepPlan::backward(backend::Backend& be, const Network& net, const float* params, float* grads, int64_t rows,
                        float batch_share, const PassPrecision& mp) {
  const size_t L = net.layers.size();
  const bool mixed = mp.rounding != backend::Rounding::None;
  std::vector<const float*> xs;
  for (size_t i = L; i-- > 0;) {
    if (!grad_[i + 1]) continue;  // nothing before this layer trains
    if (net.is_absorbed(i)) {  // the layer before takes its gradient, or the layer after gives its input's
      zero(be, dead_after_backward_[i]);
      continue;
    }
    const Layer& layer = *net.layers[i];
    xs.clear();
    for (int t : net.inputs[i]) xs.push_back(act_[static_cast<size_t>(t)]);
    LayerContext c;
    c.be = &be;
    c.rows = rows;
    c.x = xs.front();
    c.xs = xs.data();
    c.y = act_[i + 1];
    c.dy = grad_[i + 1];
    c.dx = edge_grad_[i].front();
    c.dxs = edge_grad_[i].data();
    c.w = layer_params(net, i, params, mp);
    c.dw = layer.trainable() ? grads + net.param_offset[i] : nullptr;
    c.scratch = scratch_[i];
    c.workspace = backward_workspace_[i];
    c.training = true;
    c.fold_activation = net.fold_output_activation && i + 1 == L;
    c.fused_activation = net.fused_activation_of(i);
    c.input_padding = net.input_padding_of(i);
    c.batch_share = batch_share;
    c.rounding = mp.rounding;
    c.masks = masks_[i].data();
    c.mask = masks_[i].front();
    layer.backward(c);
    if (mixed && !layer.rounds_input_grads(c.fold_activation))
      for (size_t k = 0; k < edge_grad_[i].size(); ++k)
        if (float* dx = edge_grad_[i][k]; dx && !layer.aliases_input())
          be.round_to(mp.rounding, rows * num_elements(net.shapes[static_cast<size_t>(net.inputs[i][k])]), dx, dx);
    for (const PendingSum& s : sums_after_[i]) {
      const size_t t = static_cast<size_t>(s.tensor);
      const int64_t n = rows * num_elements(net.shapes[t]);
      be.add(n, grad_[t], s.extra, grad_[t]);
      if (mixed) be.round_to(mp.rounding, n, grad_[t], grad_[t]);  // a sum of 16-bit gradients is one too
    }
    zero(be, dead_after_backward_[i]);
  }
}

void StepPlan::zero(backend::Backend& be, const std::vector<DeadSpan>& spans) const {
  for (const DeadSpan& d : spans) be.fill_zero(d.bytes, d.at);
}

}  // namespace kx::core
