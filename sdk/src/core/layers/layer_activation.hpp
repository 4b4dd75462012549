// The activation a layer applies after its linear part (Dense, Conv2D, DepthwiseConv2D: Keras's
// `activation=`). relu, sigmoid, tanh and softmax are applied in place and differentiated from the
// output y; the others (swish, gelu, ...) need their input z for the gradient, so the layer writes z
// into its scratch (kept from forward to backward) and y = act(z) beside it.
#pragma once
#include <cstdint>

#include "backend/pointwise_activation_math.hpp"
#include "core/layers/layer.hpp"

namespace kx::core {

// Whether a layer with this activation keeps its linear output z (scratch_per_sample grows by its output).
inline bool keeps_linear_output(Activation act) { return backend::activation_grad_reads_input(act); }

// Whether the layer before an activation layer may apply it (Layer::fusable_activation): ReLU, and
// those whose gradient reads their input, computed as the activation layer computes them.
inline bool fusable(Activation act) { return act == Activation::Relu || keeps_linear_output(act); }

// Where the linear part writes: the scratch that keeps z, or y itself.
inline float* linear_output(const LayerContext& c, Activation act) {
  return !c.fold_activation && keeps_linear_output(act) ? c.scratch : c.y;
}

// y = act(z) over positions x cols, z where linear_output put it (nothing for None or a folded activation).
inline void apply_activation(const LayerContext& c, Activation act, int64_t positions, int64_t cols) {
  if (c.fold_activation || act == Activation::None) return;
  if (keeps_linear_output(act))
    c.be->pointwise_activation_forward(act, positions * cols, c.scratch, c.y);
  else
    c.be->activation_forward(act, positions, cols, c.y);
}

// dy = dL/dz in place from dL/dy (nothing for None or a folded activation), rounded to the 16-bit type
// under mixed precision where the activation's gradient is no 16-bit value of itself.
inline void activation_gradient(const LayerContext& c, Activation act, int64_t positions, int64_t cols) {
  if (c.fold_activation || act == Activation::None) return;
  if (keeps_linear_output(act))
    c.be->pointwise_activation_backward(act, positions * cols, c.scratch, c.dy, c.dy);
  else
    c.be->activation_backward(act, positions, cols, c.y, c.dy, c.dy);
  if (c.rounding != backend::Rounding::None && !piecewise_linear(act))
    c.be->round_to(c.rounding, positions * cols, c.dy, c.dy);
}

}  // namespace kx::core
