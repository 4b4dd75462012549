#include "core/train/step_plan.hpp"

#include "core/checked_size.hpp"

namespace kx::core {

void StepPlan::reserve(backend::Backend& be, const Network& net, int64_t max_rows, int64_t label_size) {
  if (max_rows <= capacity_ && label_size == label_size_ && revision_ == net.revision) return;
  const size_t L = net.layers.size(), T = L + 1;
  storage_.clear();
  ++generation_;
  capacity_ = 0;  // until every buffer is allocated: an allocation failure leaves an empty plan
  act_.assign(T, nullptr);
  grad_.assign(T, nullptr);
  edge_grad_.assign(L, {});
  sums_after_.assign(L, {});
  scratch_.assign(L, nullptr);
  auto buffer = [&](int64_t floats) {
    checked_dimension(floats, 0, "a training buffer");
    storage_.push_back(be.allocate(static_cast<size_t>(floats) * sizeof(float)));
    return storage_.back().data();
  };
  auto floats_of = [&](size_t t) {
    return checked_product({max_rows, num_elements(net.shapes[t])}, "a batch of tensor " + std::to_string(t));
  };

  // A tensor's gradient is needed when the layer that made it, or one before that, trains.
  std::vector<bool> needs_grad(T, false);
  for (size_t i = 0; i < L; ++i) {
    const Layer& layer = *net.layers[i];
    bool need = layer.trainable() && !layer.params().empty();
    for (int t : net.inputs[i]) need = need || needs_grad[static_cast<size_t>(t)];
    needs_grad[i + 1] = need;
  }
  needs_grad[L] = true;  // the loss always writes the output's gradient

  // Which layers read each tensor, in layer order.
  std::vector<std::vector<std::pair<size_t, size_t>>> consumers(T);  // (layer, input slot)
  for (size_t i = 0; i < L; ++i) {
    edge_grad_[i].assign(net.inputs[i].size(), nullptr);
    for (size_t k = 0; k < net.inputs[i].size(); ++k) consumers[static_cast<size_t>(net.inputs[i][k])].push_back({i, k});
  }

  act_[0] = buffer(floats_of(0));
  for (size_t i = 0; i < L; ++i) {
    const Layer& layer = *net.layers[i];
    const size_t in = static_cast<size_t>(net.inputs[i].front());
    act_[i + 1] = layer.aliases_input() ? act_[in] : buffer(floats_of(i + 1));
    if (const int64_t n = layer.scratch_floats_on(be, max_rows); n > 0) scratch_[i] = buffer(n);
  }
  // Tensors in order: a tensor's gradient buffer is known before the edges that read into it.
  for (size_t t = 0; t < T; ++t) {
    if (t > 0) {
      const Layer& producer = *net.layers[t - 1];
      if (producer.aliases_input())
        grad_[t] = edge_grad_[t - 1][0];  // a reshape's gradient is its input's (null if not needed)
      else if (needs_grad[t])
        grad_[t] = buffer(floats_of(t));
    }
    if (!grad_[t]) continue;
    // The first reader writes the gradient itself; later readers write their own buffers, added to
    // it after the first reader's backward, which runs last.
    const auto& readers = consumers[t];
    for (size_t c = 0; c < readers.size(); ++c) {
      const auto [layer, slot] = readers[c];
      if (c == 0) {
        edge_grad_[layer][slot] = grad_[t];
      } else {
        float* extra = buffer(floats_of(t));
        edge_grad_[layer][slot] = extra;
        sums_after_[readers.front().first].push_back({static_cast<int>(t), extra});
      }
    }
  }
  labels_ = be.allocate(static_cast<size_t>(checked_product({max_rows, label_size}, "a batch's labels")) * sizeof(float));
  batch_index_ = be.allocate(static_cast<size_t>(max_rows) * sizeof(int64_t));
  weights_ = be.allocate(static_cast<size_t>(max_rows) * sizeof(float));
  capacity_ = max_rows;
  label_size_ = label_size;
  revision_ = net.revision;
}

const float* StepPlan::layer_params(const Network& net, size_t i, const float* params, const PassPrecision& mp) {
  const bool rounded = mp.rounded_params && net.layers[i]->autocasts_weights();
  return (rounded ? mp.rounded_params : params) + net.param_offset[i];
}

void StepPlan::forward(backend::Backend& be, const Network& net, const float* params, int64_t rows, bool training,
                       const uint64_t* step_seed, int64_t first_row, const PassPrecision& mp) {
  const size_t L = net.layers.size();
  const bool mixed = mp.rounding != backend::Rounding::None;
  // Keras casts the model's input to the compute type as the first layer reads it.
  if (mixed) be.round_to(mp.rounding, rows * net.input_size(), act_[0], act_[0]);
  std::vector<const float*> xs;
  for (size_t i = 0; i < L; ++i) {
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
    c.training = training;
    c.fold_activation = net.fold_output_activation && i + 1 == L;
    c.step_seed = step_seed;
    c.seed_stream = i;
    c.first_row = first_row;
    c.rounding = mp.rounding;
    const Layer& layer = *net.layers[i];
    layer.forward(c);
    if (mixed && !layer.aliases_input() && !layer.rounds_output(c.fold_activation))
      be.round_to(mp.rounding, rows * num_elements(net.shapes[i + 1]), c.y, c.y);
  }
}

void StepPlan::backward(backend::Backend& be, const Network& net, const float* params, float* grads, int64_t rows,
                        float batch_share, const PassPrecision& mp) {
  const size_t L = net.layers.size();
  const bool mixed = mp.rounding != backend::Rounding::None;
  std::vector<const float*> xs;
  for (size_t i = L; i-- > 0;) {
    if (!grad_[i + 1]) continue;  // nothing before this layer trains
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
    c.training = true;
    c.fold_activation = net.fold_output_activation && i + 1 == L;
    c.batch_share = batch_share;
    c.rounding = mp.rounding;
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
  }
}

}  // namespace kx::core
