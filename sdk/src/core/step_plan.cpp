#include "core/step_plan.hpp"

namespace kx::core {

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void StepPlan::reserve(backend::Backend& be, const Network& net, int64_t max_rows, int64_t label_size) {
  if (max_rows <= capacity_ && label_size == label_size_) return;
  const size_t L = net.layers.size();
  storage_.clear();
  capacity_ = 0;  // until every buffer is allocated: an allocation failure leaves an empty plan
  act_.assign(L + 1, nullptr);
  grad_.assign(L + 1, nullptr);
  scratch_.assign(L, nullptr);
  auto buffer = [&](int64_t floats) {
    storage_.push_back(be.allocate(static_cast<size_t>(floats) * sizeof(float)));
    return storage_.back().data();
  };
  // An input gradient is needed only when some layer before has parameters.
  std::vector<bool> has_params_before(L + 1, false);
  for (size_t i = 0; i < L; ++i) has_params_before[i + 1] = has_params_before[i] || !net.layers[i]->params().empty();

  act_[0] = buffer(max_rows * num_elements(net.shapes[0]));
  for (size_t i = 0; i < L; ++i) {
    const Layer& layer = *net.layers[i];
    const int64_t out = max_rows * num_elements(net.shapes[i + 1]);
    act_[i + 1] = layer.aliases_input() ? act_[i] : buffer(out);
    if (layer.scratch_per_sample() > 0) scratch_[i] = buffer(max_rows * layer.scratch_per_sample());
  }
  // Gradients: the output's always; a layer's input gradient where something before it trains.
  grad_[L] = buffer(max_rows * num_elements(net.shapes[L]));
  for (size_t i = L; i-- > 0;) {
    const Layer& layer = *net.layers[i];
    if (layer.aliases_input())
      grad_[i] = grad_[i + 1];
    else if (has_params_before[i])
      grad_[i] = buffer(max_rows * num_elements(net.shapes[i]));
  }
  labels_ = be.allocate(static_cast<size_t>(max_rows * label_size) * sizeof(float));
  batch_index_ = be.host_accessible() ? backend::DeviceBuffer{} : be.allocate(static_cast<size_t>(max_rows) * sizeof(int64_t));
  capacity_ = max_rows;
  label_size_ = label_size;
}

void StepPlan::forward(backend::Backend& be, const Network& net, const float* params, int64_t rows, bool training,
                       uint64_t step_seed, int64_t first_row) {
  const size_t L = net.layers.size();
  for (size_t i = 0; i < L; ++i) {
    LayerContext c;
    c.be = &be;
    c.rows = rows;
    c.x = act_[i];
    c.y = act_[i + 1];
    c.w = params + net.param_offset[i];
    c.scratch = scratch_[i];
    c.training = training;
    c.fold_activation = net.fold_output_activation && i + 1 == L;
    c.seed = mix_seed(step_seed, i);
    c.first_row = first_row;
    net.layers[i]->forward(c);
  }
}

void StepPlan::backward(backend::Backend& be, const Network& net, const float* params, float* grads, int64_t rows) {
  const size_t L = net.layers.size();
  for (size_t i = L; i-- > 0;) {
    LayerContext c;
    c.be = &be;
    c.rows = rows;
    c.x = act_[i];
    c.y = act_[i + 1];
    c.dy = grad_[i + 1];
    c.dx = grad_[i];
    c.w = params + net.param_offset[i];
    c.dw = grads + net.param_offset[i];
    c.scratch = scratch_[i];
    c.training = true;
    c.fold_activation = net.fold_output_activation && i + 1 == L;
    net.layers[i]->backward(c);
  }
}

}  // namespace kx::core
