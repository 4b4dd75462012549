// Optimizer settings, with Keras 3's defaults. Every value is taken as given, zero included (Keras
// accepts beta_1=0); only an unset learning rate depends on the optimizer.
#pragma once
#include <optional>

namespace kx {

// AdamW is Keras 3's AdamW: Adam after a decoupled weight decay of every trained weight.
enum class OptimizerKind { Adam = 0, Sgd = 1, AdamW = 2, RmsProp = 3 };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  std::optional<double> learning_rate;  // unset: 1e-2 for SGD, else 1e-3
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
  double momentum = 0;       // SGD and RMSprop
  double weight_decay = 0.004;  // AdamW only: p -= p * weight_decay * learning_rate before each step
  double rho = 0.9;             // RMSprop only: the decay of its average of squared gradients
  bool centered = false;        // RMSprop only: divide by the gradients' variance, not their mean square
  // Keras's use_ema: after every step ema = ema_momentum * ema + (1 - ema_momentum) * weights over the
  // trained weights (the first step copies them), and the average replaces those weights when fit
  // ends, as Keras's finalize_variable_values. It is optimizer state: checkpoints keep it.
  bool use_ema = false;
  double ema_momentum = 0.99;

  // The same settings with the learning rate filled in; throws InvalidArgument for values out of range.
  OptimizerConfig resolved() const;
  // The learning rate, resolved().
  double rate() const { return resolved().learning_rate.value_or(0); }
  // Which per-weight slots the optimizer keeps (use_ema's average aside): m (Adam's and AdamW's first
  // moment, SGD's and RMSprop's momentum), v (Adam's and AdamW's second moment, RMSprop's velocity) and
  // a (centered RMSprop's average gradient).
  bool uses_slot_m() const;
  bool uses_slot_v() const;
  bool uses_slot_a() const;
  int slot_count() const { return (uses_slot_m() ? 1 : 0) + (uses_slot_v() ? 1 : 0) + (uses_slot_a() ? 1 : 0); }
  // Adam's bias-corrected rate drives the update (Adam, AdamW).
  bool adam_family() const { return kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW; }
};

}  // namespace kx
