#include "kx/loss.hpp"

namespace kx {

const char* loss_name(LossKind k) {
  switch (k) {
    case LossKind::SparseCategoricalCrossentropy: return "sparse_categorical_crossentropy";
    case LossKind::CategoricalCrossentropy: return "categorical_crossentropy";
    case LossKind::BinaryCrossentropy: return "binary_crossentropy";
    case LossKind::MeanSquaredError: return "mean_squared_error";
    case LossKind::MeanAbsoluteError: return "mean_absolute_error";
    case LossKind::Huber: return "huber_loss";
  }
  return "?";
}

}  // namespace kx
