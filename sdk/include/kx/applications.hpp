// Ready-made architectures, as keras.applications builds them (same layers, names and weights).
#pragma once
#include <cstdint>
#include <string>

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

// keras.applications.MobileNetV2's settings (Keras's defaults).
struct MobileNetV2Options {
  double alpha = 1.0;                 // width: filters of every block scaled, rounded to multiples of 8
  Shape input_shape{224, 224, 3};     // (height, width, channels), at least 32x32
  bool include_top = true;            // global average pooling and a Dense of `classes`
  std::string pooling;                // without the top: "" (the feature map) or "avg" ("max" is not supported)
  int64_t classes = 1000;
  std::string classifier_activation = "softmax";
};

// MobileNetV2 (Sandler et al. 2018) with Keras's layers and names (Conv1, bn_Conv1, block_1_expand,
// block_1_depthwise, ..., Conv_1, predictions): 17 inverted residual blocks of 1x1 expansion, 3x3
// depthwise convolution and 1x1 projection, ReLU6 throughout. Uncompiled; throws InvalidArgument,
// or Unsupported for pooling "max".
Model mobilenet_v2(const Strategy& strategy, const MobileNetV2Options& options = {});

// An application by Keras's class name ("ResNet50", "MobileNetV2") with its keyword arguments as a
// JSON object ({"alpha": 0.5, "input_shape": [96, 96, 3], "classes": 10}; absent keys take Keras's
// defaults; "weights" may only be null). InvalidArgument names an unknown application or argument.
Model application(const Strategy& strategy, const std::string& name, const std::string& options_json);

}  // namespace kx::applications
