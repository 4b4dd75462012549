// Loss functions. The loss of a step is the mean over the global batch.
#pragma once

namespace kx {

enum class LossKind {
  SparseCategoricalCrossentropy = 0,
  CategoricalCrossentropy = 1,
  BinaryCrossentropy = 2,
  MeanSquaredError = 3,
};

struct LossConfig {
  LossKind kind = LossKind::SparseCategoricalCrossentropy;
  bool from_logits = false;
};

const char* loss_name(LossKind k);

}  // namespace kx
