// The "accuracy" metric, resolved the way Keras resolves the string "accuracy".
#pragma once
#include <cstdint>

#include "kx/loss.hpp"

namespace kx {

enum class AccuracyKind { Binary, Categorical, SparseCategorical };

// Keras: binary cross-entropy -> binary accuracy, sparse CE -> sparse categorical, CE -> categorical;
// otherwise by shapes: one output -> binary, one label per sample -> sparse, else categorical.
AccuracyKind choose_accuracy(LossKind loss, int64_t outputs_per_sample, int64_t labels_per_sample);

}  // namespace kx
