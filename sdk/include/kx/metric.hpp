// The "accuracy" metric, resolved the way Keras resolves the string "accuracy".
#pragma once
#include <cstdint>

#include "kx/loss.hpp"

namespace kx {

enum class AccuracyKind { Binary, Categorical, SparseCategorical };

// Keras: binary cross-entropy -> binary accuracy, sparse CE -> sparse categorical, CE -> categorical;
// otherwise by the last axis of the output and of the labels: one output -> binary, one label ->
// sparse, else categorical. The categorical kinds compare the argmax along the last axis.
AccuracyKind choose_accuracy(LossKind loss, int64_t outputs_last_axis, int64_t labels_last_axis);

}  // namespace kx
