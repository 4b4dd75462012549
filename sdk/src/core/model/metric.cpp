#include "kx/metric.hpp"

namespace kx {

AccuracyKind choose_accuracy(LossKind loss, int64_t outputs_last_axis, int64_t labels_last_axis) {
  switch (loss) {
    case LossKind::BinaryCrossentropy: return AccuracyKind::Binary;
    case LossKind::SparseCategoricalCrossentropy: return AccuracyKind::SparseCategorical;
    case LossKind::CategoricalCrossentropy: return AccuracyKind::Categorical;
    case LossKind::MeanSquaredError:
    case LossKind::MeanAbsoluteError:
    case LossKind::Huber: break;
  }
  if (outputs_last_axis == 1) return AccuracyKind::Binary;
  if (labels_last_axis == 1) return AccuracyKind::SparseCategorical;
  return AccuracyKind::Categorical;
}

}  // namespace kx
