// Keras's dynamic loss scaling (keras/src/optimizers/loss_scale_optimizer.py), one step of its state
// machine, shared by the CPU and CUDA kernels (loss_scale_update):
//   finite gradients: apply them divided by the scale; then, if step_counter == growth_steps - 1, the
//                     scale doubles and the counter restarts, else the counter grows by one;
//   otherwise:        skip the update, halve the scale, restart the counter.
#pragma once
#include "backend/backend.hpp"
#include "backend/host_device.hpp"

namespace kx::backend {

KX_HOST_DEVICE inline void update_loss_scale(LossScaleState& s) {
  if (s.finite != 0.0f) {
    s.grad_factor = 1.0f / s.scale;  // exact for the powers of two a dynamic scale takes
    s.applied = 1.0f;
    if (s.good_steps + 1 >= s.growth_steps) {
      s.scale *= 2.0f;
      s.good_steps = 0;
    } else {
      ++s.good_steps;
    }
  } else {
    s.grad_factor = 0.0f;
    s.applied = 0.0f;
    s.scale *= 0.5f;
    s.good_steps = 0;
  }
  s.finite = 1.0f;
}

}  // namespace kx::backend
