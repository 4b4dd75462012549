// Loss functions. The loss of a step is the mean over the global batch.
#pragma once

namespace kx {

enum class LossKind {
  SparseCategoricalCrossentropy = 0,
  CategoricalCrossentropy = 1,
  BinaryCrossentropy = 2,
  MeanSquaredError = 3,
  MeanAbsoluteError = 4,
  Huber = 5,
};
// How many losses there are: a new one goes last, and is named here.
inline constexpr int kLossKindCount = static_cast<int>(LossKind::Huber) + 1;
constexpr bool is_valid(LossKind k) { return static_cast<int>(k) >= 0 && static_cast<int>(k) < kLossKindCount; }

struct LossConfig {
  LossKind kind = LossKind::SparseCategoricalCrossentropy;
  bool from_logits = false;
  // Huber's delta (Keras's default): quadratic within it, linear beyond.
  double huber_delta = 1.0;
};

const char* loss_name(LossKind k);

}  // namespace kx
