// MobileNetV3Small and MobileNetV3Large as keras.applications builds them (mobilenet_v3.py), layer for
// layer and name for name: hard_swish as Activation("hard_swish"), hard_sigmoid as Keras writes it
// (ReLU(6.0)(x + 3.0) * (1.0 / 6.0): two operations around a ReLU), squeeze-and-excite blocks ending in
// a broadcast Multiply.
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

// Keras's _depth: v rounded to a multiple of 8, never more than 10% below v.
int64_t depth(double v) {
  constexpr int64_t divisor = 8;
  int64_t rounded = std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

// One _inverted_res_block call of Keras's stack_fn.
struct Block {
  double expansion;
  int64_t filters;   // before alpha
  int64_t kernel;    // 0: the model's kernel (5, or 3 when minimalistic)
  int64_t stride;
  bool se;           // squeeze-and-excite (unless minimalistic)
  bool own_activation;  // the model's activation (hard_swish), else relu
};

constexpr Block kSmall[] = {
    {1, 16, 3, 2, true, false},          {72.0 / 16, 24, 3, 2, false, false}, {88.0 / 24, 24, 3, 1, false, false},
    {4, 40, 0, 2, true, true},           {6, 40, 0, 1, true, true},           {6, 40, 0, 1, true, true},
    {3, 48, 0, 1, true, true},           {3, 48, 0, 1, true, true},           {6, 96, 0, 2, true, true},
    {6, 96, 0, 1, true, true},           {6, 96, 0, 1, true, true},
};
constexpr Block kLarge[] = {
    {1, 16, 3, 1, false, false},  {4, 24, 3, 2, false, false},  {3, 24, 3, 1, false, false},
    {3, 40, 0, 2, true, false},   {3, 40, 0, 1, true, false},   {3, 40, 0, 1, true, false},
    {6, 80, 3, 2, false, true},   {2.5, 80, 3, 1, false, true}, {2.3, 80, 3, 1, false, true},
    {2.3, 80, 3, 1, false, true}, {6, 112, 3, 1, true, true},   {6, 112, 3, 1, true, true},
    {6, 160, 0, 2, true, true},   {6, 160, 0, 1, true, true},   {6, 160, 0, 1, true, true},
};

class MobileNetV3Builder {
 public:
  MobileNetV3Builder(Model& m, bool minimalistic) : b_(m), minimalistic_(minimalistic) {}

  KerasLayerBuilder& keras() { return b_; }

  std::string conv(const std::string& name, const std::string& from, int64_t filters, int64_t kernel, int64_t stride,
                   bool bias, const char* padding = "same") {
    return b_.add("Conv2D", name,
                  {{"filters", Value(filters)}, {"kernel_size", Value(kernel)}, {"strides", Value(stride)},
                   {"padding", Value(padding)}, {"use_bias", Value(bias)}},
                  {from});
  }
  std::string batch_norm(const std::string& name, const std::string& from) {
    return b_.add("BatchNormalization", name, {{"epsilon", Value(1e-3)}, {"momentum", Value(0.999)}}, {from});
  }
  std::string relu(const std::string& from) { return b_.add("ReLU", b_.auto_name("re_lu"), {}, {from}); }
  // The model's activation: hard_swish, or relu when minimalistic.
  std::string activation(const std::string& from, bool own = true) {
    if (minimalistic_ || !own) return relu(from);
    return b_.add("Activation", b_.auto_name("activation"), {{"activation", Value("hard_swish")}}, {from});
  }
  // ReLU(6.0)(x + 3.0) * (1.0 / 6.0), as Keras's mobilenet_v3.hard_sigmoid.
  std::string hard_sigmoid(const std::string& from) {
    const std::string shifted = b_.operation("Add", "add", from, 3.0);
    const std::string capped = b_.add("ReLU", b_.auto_name("re_lu"), {{"max_value", Value(6.0)}}, {shifted});
    return b_.operation("Multiply", "multiply", capped, 1.0 / 6.0);
  }

  std::string block(const std::string& input, int64_t& channels, int64_t& h, int64_t& w, const Block& k, double alpha,
                    int id) {
    const int64_t filters = depth(static_cast<double>(k.filters) * alpha);
    const int64_t kernel = k.kernel ? k.kernel : (minimalistic_ ? 3 : 5);
    const bool se = k.se && !minimalistic_;
    std::string prefix = "expanded_conv_";
    std::string x = input;
    const int64_t expanded = depth(static_cast<double>(channels) * k.expansion);
    if (id) {
      prefix = "expanded_conv_" + std::to_string(id) + "_";
      x = conv(prefix + "expand", x, expanded, 1, 1, false);
      x = activation(batch_norm(prefix + "expand_bn", x), k.own_activation);
    }
    if (k.stride == 2) {
      // imagenet_utils.correct_pad: one row (column) less on top (left) of an even size.
      const int64_t c = kernel / 2, top = c - (1 - h % 2), left = c - (1 - w % 2);
      x = b_.add("ZeroPadding2D", prefix + "depthwise_pad",
                 {{"padding", Value(Value::Array{Value(Value::Array{Value(top), Value(c)}),
                                                 Value(Value::Array{Value(left), Value(c)})})}},
                 {x});
    }
    x = b_.add("DepthwiseConv2D", prefix + "depthwise",
               {{"kernel_size", Value(kernel)}, {"strides", Value(k.stride)},
                {"padding", Value(k.stride == 1 ? "same" : "valid")}, {"use_bias", Value(false)}},
               {x});
    x = activation(batch_norm(prefix + "depthwise_bn", x), k.own_activation);
    if (se) {
      const std::string pooled = b_.add("GlobalAveragePooling2D", prefix + "squeeze_excite_avg_pool",
                                        {{"keepdims", Value(true)}}, {x});
      std::string s = conv(prefix + "squeeze_excite_conv", pooled, depth(static_cast<double>(expanded) * 0.25), 1, 1, true);
      s = b_.add("ReLU", prefix + "squeeze_excite_relu", {}, {s});
      s = conv(prefix + "squeeze_excite_conv_1", s, expanded, 1, 1, true);
      s = hard_sigmoid(s);
      x = b_.add("Multiply", prefix + "squeeze_excite_mul", {}, {x, s});
    }
    x = batch_norm(prefix + "project_bn", conv(prefix + "project", x, filters, 1, 1, false));
    if (k.stride == 2) h = (h + 1) / 2, w = (w + 1) / 2;
    if (k.stride == 1 && channels == filters) x = b_.add("Add", prefix + "add", {}, {input, x});
    channels = filters;
    return x;
  }

 private:
  KerasLayerBuilder b_;
  bool minimalistic_;
};

}  // namespace

Model mobilenet_v3(const Strategy& strategy, const MobileNetV3Options& o) {
  const char* name = o.large ? "MobileNetV3Large" : "MobileNetV3Small";
  const Shape& in = o.input_shape;
  require(in.size() == 3 && in[0] >= 32 && in[1] >= 32 && in[2] > 0, Status::InvalidArgument,
          std::string(name) + " needs inputs of shape (height, width, channels), at least 32x32; got " + to_string(in));
  require(std::isfinite(o.alpha) && o.alpha > 0 && o.alpha <= 16, Status::InvalidArgument,
          std::string(name) + "'s alpha must be in (0, 16], got " + std::to_string(o.alpha));
  require(!o.include_top || o.classes > 0, Status::InvalidArgument, std::string(name) + " needs at least one class");
  require(o.pooling.empty() || o.pooling == "avg" || o.pooling == "max", Status::InvalidArgument,
          std::string(name) + " pooling \"" + o.pooling + "\": none, \"avg\" or \"max\"");
  require(std::isfinite(o.dropout_rate) && o.dropout_rate >= 0 && o.dropout_rate < 1, Status::InvalidArgument,
          std::string(name) + "'s dropout_rate must be in [0, 1)");
  Model m = Model::functional(strategy, in, "input_layer");
  MobileNetV3Builder b(m, o.minimalistic);
  KerasLayerBuilder& k = b.keras();
  std::string x = "input_layer";
  if (o.include_preprocessing)
    x = k.add("Rescaling", k.auto_name("rescaling"), {{"scale", Value(1.0 / 127.5)}, {"offset", Value(-1.0)}}, {x});
  x = b.batch_norm("conv_bn", b.conv("conv", x, 16, 3, 2, false));
  x = b.activation(x);
  int64_t channels = 16, h = (in[0] + 1) / 2, w = (in[1] + 1) / 2;
  int id = 0;
  if (o.large)
    for (const Block& blk : kLarge) x = b.block(x, channels, h, w, blk, o.alpha, id++);
  else
    for (const Block& blk : kSmall) x = b.block(x, channels, h, w, blk, o.alpha, id++);
  const int64_t last_conv = depth(static_cast<double>(channels) * 6);
  int64_t last_point = o.large ? 1280 : 1024;
  if (o.alpha > 1.0) last_point = depth(static_cast<double>(last_point) * o.alpha);
  x = b.activation(b.batch_norm("conv_1_bn", b.conv("conv_1", x, last_conv, 1, 1, false)));
  if (o.include_top) {
    x = k.add("GlobalAveragePooling2D", k.auto_name("global_average_pooling2d"), {{"keepdims", Value(true)}}, {x});
    x = b.activation(b.conv("conv_2", x, last_point, 1, 1, true));
    if (o.dropout_rate > 0) x = k.add("Dropout", k.auto_name("dropout"), {{"rate", Value(o.dropout_rate)}}, {x});
    x = b.conv("logits", x, o.classes, 1, 1, true);
    x = k.add("Flatten", k.auto_name("flatten"), {}, {x});
    k.add("Activation", "predictions", {{"activation", Value(o.classifier_activation)}}, {x});
  } else {
    k.pooling_tail(o.pooling, x, "avg_pool", "max_pool");
  }
  return m;
}

}  // namespace kx::applications
