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
  std::string pooling;                // without the top: "" (the feature map), "avg" or "max"
  int64_t classes = 1000;
  std::string classifier_activation = "softmax";
};

// MobileNetV2 (Sandler et al. 2018) with Keras's layers and names (Conv1, bn_Conv1, block_1_expand,
// block_1_depthwise, ..., Conv_1, predictions): 17 inverted residual blocks of 1x1 expansion, 3x3
// depthwise convolution and 1x1 projection, ReLU6 throughout. Uncompiled; throws InvalidArgument.
Model mobilenet_v2(const Strategy& strategy, const MobileNetV2Options& options = {});

// keras.applications.MobileNetV3Small / MobileNetV3Large's settings (Keras's defaults).
struct MobileNetV3Options {
  bool large = false;                 // MobileNetV3Large, else MobileNetV3Small
  double alpha = 1.0;                 // width: filters of every block scaled, rounded to multiples of 8
  bool minimalistic = false;          // 3x3 kernels, relu, no squeeze-and-excite
  Shape input_shape{224, 224, 3};     // (height, width, channels), at least 32x32
  bool include_top = true;            // pooling, two 1x1 convolutions to `classes`, flatten, activation
  std::string pooling;                // without the top: "" (the feature map), "avg" or "max"
  int64_t classes = 1000;
  double dropout_rate = 0.2;          // before the logits (0: no Dropout layer)
  std::string classifier_activation = "softmax";
  bool include_preprocessing = true;  // a Rescaling from [0, 255] to [-1, 1] first
};

// MobileNetV3 (Howard et al. 2019) with Keras's layers and names (conv, conv_bn, expanded_conv_depthwise,
// expanded_conv_1_expand, ..., expanded_conv_3_squeeze_excite_mul, conv_1, conv_2, logits, predictions):
// inverted residual blocks with hard_swish and squeeze-and-excite (hard_sigmoid as Keras writes it, two
// operations on tensors around a ReLU6). Uncompiled; throws InvalidArgument.
Model mobilenet_v3(const Strategy& strategy, const MobileNetV3Options& options = {});

// keras.applications.EfficientNetB0's settings (Keras's defaults).
struct EfficientNetOptions {
  Shape input_shape{224, 224, 3};     // (height, width, channels), at least 32x32; pixels in [0, 255]
  bool include_top = true;            // global average pooling, Dropout(0.2) and a Dense of `classes`
  std::string pooling;                // without the top: "" (the feature map), "avg" or "max"
  int64_t classes = 1000;
  std::string classifier_activation = "softmax";
};

// EfficientNetB0 (Tan and Le 2019) with Keras's layers and names (rescaling, normalization,
// stem_conv_pad, stem_conv, stem_bn, stem_activation, block1a_dwconv, ..., block7a_project_bn, top_conv,
// top_bn, top_activation, avg_pool, top_dropout, predictions): 16 MBConv blocks with swish,
// squeeze-and-excite and drop-connect. Its Normalization's statistics are weights (mean 0, variance 1
// until Keras's weight file loads). Uncompiled; throws InvalidArgument.
Model efficientnet_b0(const Strategy& strategy, const EfficientNetOptions& options = {});

// An application by Keras's class name ("ResNet50", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large",
// "EfficientNetB0") with its keyword arguments as a
// JSON object ({"alpha": 0.5, "input_shape": [96, 96, 3], "classes": 10}; absent keys take Keras's
// defaults; "weights" may only be null). InvalidArgument names an unknown application or argument.
Model application(const Strategy& strategy, const std::string& name, const std::string& options_json);

}  // namespace kx::applications
