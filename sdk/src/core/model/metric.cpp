#include "kx/metric.hpp"

namespace kx {

AccuracyKind choose_accuracy(LossKind loss, int64_t outputs_per_sample, int64_t labels_per_sample) {
  switch (loss) {
    case LossKind::BinaryCrossentropy: return AccuracyKind::Binary;
    case LossKind::SparseCategoricalCrossentropy: return AccuracyKind::SparseCategorical;
    case LossKind::CategoricalCrossentropy: return AccuracyKind::Categorical;
    case LossKind::MeanSquaredError: break;
  }
  if (outputs_per_sample == 1) return AccuracyKind::Binary;
  if (labels_per_sample == 1) return AccuracyKind::SparseCategorical;
  return AccuracyKind::Categorical;
}

}  // namespace kx
