// What one replica's training holds in its device's memory for a global batch: the buffers compile
// allocated (weights, gradients, optimizer slots) and the step plan's, laid out as reserve would lay
// them out, without allocating.
#include <string>

#include "config/test_hooks.hpp"
#include "core/model/model_impl.hpp"
#include "core/train/step_arena.hpp"
#include "kx/error.hpp"

namespace kx {

TrainingMemory Model::Impl::training_memory(int64_t batch) const {
  require_compiled("training_memory");
  require(batch >= 1, Status::InvalidArgument,
          "training_memory needs a batch of at least 1 sample, got " + std::to_string(batch));
  const Replica& r = replicas.front();
  TrainingMemory m;
  m.batch = batch;
  m.rows = batch / total_replicas + (batch % total_replicas != 0);  // as fit reserves the plans
  auto bytes = [](const backend::DeviceBuffer& b) { return static_cast<int64_t>(b.bytes()); };
  m.weights = bytes(r.params) + bytes(r.rounded_params) + bytes(r.loss_scale);
  m.weight_gradients = bytes(r.grads);
  m.optimizer_slots = bytes(r.slot_m) + bytes(r.slot_v) + bytes(r.slot_a) + bytes(r.slot_ema);
  const core::ArenaLayout layout =
      core::plan_step_arena(*r.be, net, m.rows, !config::test_hooks().no_arena_reuse);
  constexpr int64_t f = sizeof(float);
  m.step_arena = layout.arena_floats * f;
  m.activations = layout.activation_floats * f;
  m.layer_gradients = layout.gradient_floats * f;
  m.workspace = layout.workspace_floats * f;
  m.step_arena_without_reuse = m.activations + m.layer_gradients + m.workspace;
  m.scratch = layout.scratch_floats * f;
  m.batch_buffers = core::StepPlan::batch_bytes(m.rows, label_size()) + bytes(r.step_values);
  return m;
}

TrainingMemory Model::training_memory(int64_t batch) const { return impl_->training_memory(batch); }

}  // namespace kx
