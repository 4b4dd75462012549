// Ready-made architectures, as keras.applications builds them (same layers, names and weights).
#pragma once
#include <cstdint>

#include "kx/model.hpp"
#include "kx/strategy.hpp"
#include "kx/tensor.hpp"

namespace kx::applications {

// ResNet50 (He et al. 2015, Keras's "v1" layout: bias in every convolution, BatchNormalization with
// epsilon 1.001e-5, stride 2 in the first 1x1 convolution of stages 3 to 5). With include_top, global
// average pooling and a softmax Dense of `classes` follow the last stage (25,636,712 weights for 1000
// classes); without it, the model ends with the last stage's feature map (23,587,712 weights).
// input_shape is (height, width, channels), at least 32x32. Uncompiled; throws InvalidArgument.
Model resnet50(const Strategy& strategy, const Shape& input_shape = {224, 224, 3}, bool include_top = true,
               int64_t classes = 1000);

}  // namespace kx::applications
