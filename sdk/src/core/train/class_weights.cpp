#include "core/train/class_weights.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "kx/error.hpp"

namespace kx::core {

namespace {

// The class of one label row of `cols` values; -1 when it names none (a non-finite label).
int64_t class_of(const float* y, int64_t cols) {
  if (cols == 1) {
    // Keras: np.round (half to even), then int.
    const double c = std::nearbyint(static_cast<double>(y[0]));
    return std::isfinite(c) && c >= 0 && c < 9.0e18 ? static_cast<int64_t>(c) : -1;
  }
  return std::max_element(y, y + cols) - y;  // np.argmax: the first largest
}

}  // namespace

SampleWeights class_sample_weights(const Dataset& data, const std::vector<float>& class_weight) {
  require(!data.has_sample_weights(), Status::InvalidArgument,
          "class_weight cannot be used with a training dataset that has sample weights (as in Keras): fold the "
          "class weights into the sample weights instead");
  for (size_t c = 0; c < class_weight.size(); ++c)
    require(std::isfinite(class_weight[c]) && class_weight[c] >= 0, Status::InvalidArgument,
            "class_weight[" + std::to_string(c) + "] is " + std::to_string(class_weight[c]) +
                "; a class weight must be a finite number >= 0");
  const DatasetStorage& s = data.storage();
  const int64_t cols = num_elements(s.y_shape);
  auto weights = std::make_shared<std::vector<float>>(static_cast<size_t>(s.samples), 1.0f);
  for (int64_t i = 0; i < s.samples; ++i) {
    const int64_t c = class_of(s.y.data() + i * cols, cols);
    if (c >= 0 && c < static_cast<int64_t>(class_weight.size()))
      (*weights)[static_cast<size_t>(i)] = class_weight[static_cast<size_t>(c)];
  }
  return weights;
}

}  // namespace kx::core
