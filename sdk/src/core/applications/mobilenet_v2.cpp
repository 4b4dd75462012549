// MobileNetV2 as keras.applications.MobileNetV2 builds it, layer for layer and name for name, so
// weights saved from Keras by name load into it. Each layer is added from its Keras config, as Keras
// would write it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/applications/keras_layer_builder.hpp"
#include "kx/applications.hpp"
#include "kx/error.hpp"

namespace kx::applications {
namespace {

using json::Value;

// Keras's _make_divisible: v rounded to a multiple of the divisor, never more than 10% below v.
int64_t make_divisible(double v, int64_t divisor = 8) {
  int64_t rounded = std::max<int64_t>(divisor, static_cast<int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

// Keras's int(filters * alpha) before _make_divisible.
int64_t scaled(int64_t filters, double alpha) { return static_cast<int64_t>(static_cast<double>(filters) * alpha); }

class MobileNetBuilder {
 public:
  explicit MobileNetBuilder(Model& m) : b_(m) {}

  KerasLayerBuilder& keras() { return b_; }

  std::string add(const std::string& cls, const std::string& name, Value::Object config, const std::string& from) {
    return b_.add(cls, name, std::move(config), {from});
  }
  std::string conv(const std::string& name, const std::string& from, int64_t filters, int64_t kernel, int64_t stride,
                   const char* padding = "same") {
    return add("Conv2D", name,
               {{"filters", Value(filters)}, {"kernel_size", Value(kernel)}, {"strides", Value(stride)},
                {"padding", Value(padding)}, {"use_bias", Value(false)}},
               from);
  }
  std::string batch_norm(const std::string& name, const std::string& from) {
    return add("BatchNormalization", name, {{"epsilon", Value(1e-3)}, {"momentum", Value(0.999)}}, from);
  }
  std::string relu6(const std::string& name, const std::string& from) {
    return add("ReLU", name, {{"max_value", Value(6.0)}}, from);
  }

  // Keras's _inverted_res_block: expand (1x1), depthwise 3x3, project (1x1), and the residual sum
  // when the shape allows.
  std::string block(const std::string& input, int64_t in_channels, int64_t in_h, int64_t in_w, int64_t expansion,
                    int64_t stride, double alpha, int64_t filters, int block_id, int64_t& out_channels) {
    const int64_t pointwise = make_divisible(static_cast<double>(scaled(filters, alpha)));
    std::string prefix = "block_" + std::to_string(block_id) + "_";
    std::string x = input;
    if (block_id) {
      x = conv(prefix + "expand", x, expansion * in_channels, 1, 1);
      x = relu6(prefix + "expand_relu", batch_norm(prefix + "expand_BN", x));
    } else {
      prefix = "expanded_conv_";
    }
    if (stride == 2) {
      // imagenet_utils.correct_pad for a 3x3 kernel: one row (column) less on top (left) of an even size.
      const int64_t top = in_h % 2, left = in_w % 2;
      x = add("ZeroPadding2D", prefix + "pad",
              {{"padding", Value(Value::Array{Value(Value::Array{Value(top), Value(int64_t{1})}),
                                              Value(Value::Array{Value(left), Value(int64_t{1})})})}},
              x);
    }
    x = add("DepthwiseConv2D", prefix + "depthwise",
            {{"kernel_size", Value(int64_t{3})}, {"strides", Value(stride)},
             {"padding", Value(stride == 1 ? "same" : "valid")}, {"use_bias", Value(false)}},
            x);
    x = relu6(prefix + "depthwise_relu", batch_norm(prefix + "depthwise_BN", x));
    x = batch_norm(prefix + "project_BN", conv(prefix + "project", x, pointwise, 1, 1));
    out_channels = pointwise;
    if (in_channels == pointwise && stride == 1) return b_.add("Add", prefix + "add", {}, {input, x});
    return x;
  }

 private:
  KerasLayerBuilder b_;
};

}  // namespace

Model mobilenet_v2(const Strategy& strategy, const MobileNetV2Options& o) {
  const Shape& in = o.input_shape;
  require(in.size() == 3 && in[0] >= 32 && in[1] >= 32 && in[2] > 0, Status::InvalidArgument,
          "MobileNetV2 needs inputs of shape (height, width, channels), at least 32x32; got " + to_string(in));
  require(std::isfinite(o.alpha) && o.alpha > 0 && o.alpha <= 16, Status::InvalidArgument,
          "MobileNetV2's alpha must be in (0, 16], got " + std::to_string(o.alpha));
  require(!o.include_top || o.classes > 0, Status::InvalidArgument, "MobileNetV2 needs at least one class");
  require(o.pooling.empty() || o.pooling == "avg" || o.pooling == "max", Status::InvalidArgument,
          "MobileNetV2 pooling \"" + o.pooling + "\": none, \"avg\" or \"max\"");
  Model m = Model::functional(strategy, in, "input_layer");
  MobileNetBuilder b(m);
  int64_t channels = make_divisible(32 * o.alpha);
  std::string x = b.conv("Conv1", "input_layer", channels, 3, 2);
  x = b.relu6("Conv1_relu", b.batch_norm("bn_Conv1", x));
  // Keras's blocks: (filters, stride, expansion), block ids in order.
  struct Block {
    int64_t filters, stride, expansion;
  };
  constexpr Block kBlocks[] = {{16, 1, 1},  {24, 2, 6},  {24, 1, 6},  {32, 2, 6},  {32, 1, 6},  {32, 1, 6},
                               {64, 2, 6},  {64, 1, 6},  {64, 1, 6},  {64, 1, 6},  {96, 1, 6},  {96, 1, 6},
                               {96, 1, 6},  {160, 2, 6}, {160, 1, 6}, {160, 1, 6}, {320, 1, 6}};
  // "same" with stride 2 and the Conv1 layer halve sizes rounding up; a pad then "valid" too.
  int64_t h = (in[0] + 1) / 2, w = (in[1] + 1) / 2;
  for (int id = 0; id < static_cast<int>(std::size(kBlocks)); ++id) {
    const Block& k = kBlocks[id];
    int64_t out_channels = 0;
    x = b.block(x, channels, h, w, k.expansion, k.stride, o.alpha, k.filters, id, out_channels);
    channels = out_channels;
    if (k.stride == 2) h = (h + 1) / 2, w = (w + 1) / 2;
  }
  // No alpha on the last convolution below 1, as in the paper.
  const int64_t last = o.alpha > 1.0 ? make_divisible(1280 * o.alpha) : 1280;
  x = b.relu6("out_relu", b.batch_norm("Conv_1_bn", b.conv("Conv_1", x, last, 1, 1, "valid")));
  if (o.include_top) {
    x = b.add("GlobalAveragePooling2D", "global_average_pooling2d", {}, x);
    b.add("Dense", "predictions", {{"units", Value(o.classes)}, {"activation", Value(o.classifier_activation)}}, x);
  } else {
    b.keras().pooling_tail(o.pooling, x, "global_average_pooling2d", "global_max_pooling2d");
  }
  return m;
}

}  // namespace kx::applications
