// Optimizer settings, with Keras 3's defaults. Every value is taken as given, zero included (Keras
// accepts beta_1=0); only an unset learning rate depends on the optimizer.
#pragma once
#include <optional>

namespace kx {

enum class OptimizerKind { Adam = 0, Sgd = 1 };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  std::optional<double> learning_rate;  // unset: 1e-3 for Adam, 1e-2 for SGD
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
  double momentum = 0;       // SGD only
  // Keras's use_ema: after every step ema = ema_momentum * ema + (1 - ema_momentum) * weights over the
  // trained weights (the first step copies them), and the average replaces those weights when fit
  // ends, as Keras's finalize_variable_values. It is optimizer state: checkpoints keep it.
  bool use_ema = false;
  double ema_momentum = 0.99;

  // The same settings with the learning rate filled in; throws InvalidArgument for values out of range.
  OptimizerConfig resolved() const;
  // The learning rate, resolved().
  double rate() const { return resolved().learning_rate.value_or(0); }
};

}  // namespace kx
