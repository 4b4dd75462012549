// EfficientNetB0 as keras.applications builds it (efficientnet.py), layer for layer and name for name:
// the stem's Rescaling (1/255) and adapted Normalization (statistics in the weights, mean 0 and
// variance 1 until Keras's weights load), 16 MBConv blocks named block1a_ ... block7a_ with swish,
// squeeze-and-excite (GlobalAveragePooling2D, Reshape, two 1x1 convolutions, Multiply) and drop-connect
// (Dropout with noise_shape (None, 1, 1, 1), its rate growing with the block's index) before each
// residual sum. Layers the optimizer trains, their weight order and their initializers are Keras's
// (CONV_KERNEL_INITIALIZER and DENSE_KERNEL_INITIALIZER: VarianceScaling on fan_out).
#include <algorithm>
#include <string>

#include "core/applications/keras_layer_builder.hpp"
#include "kx/applications.hpp"
#include "kx/error.hpp"

namespace kx::applications {
namespace {

using json::Value;

// One row of Keras's DEFAULT_BLOCKS_ARGS (se_ratio 0.25 and id_skip true in every row).
struct BlockArgs {
  int64_t kernel, repeats, filters_in, filters_out, expand_ratio, strides;
};
constexpr BlockArgs kB0Blocks[] = {{3, 1, 32, 16, 1, 1},   {3, 2, 16, 24, 6, 2},  {5, 2, 24, 40, 6, 2},
                                   {3, 3, 40, 80, 6, 2},   {5, 3, 80, 112, 6, 1}, {5, 4, 112, 192, 6, 2},
                                   {3, 1, 192, 320, 6, 1}};
constexpr double kDropConnectRate = 0.2;  // EfficientNet's drop_connect_rate
constexpr double kTopDropoutRate = 0.2;   // EfficientNetB0's dropout_rate
constexpr double kSeRatio = 0.25;

Value pair(int64_t a, int64_t b) { return Value(Value::Array{Value(a), Value(b)}); }

// efficientnet.py's CONV_KERNEL_INITIALIZER (every convolution's kernel) and DENSE_KERNEL_INITIALIZER.
Value conv_kernel_initializer() {
  return json::parse(R"({"class_name": "VarianceScaling", "config": {"scale": 2.0, "mode": "fan_out",
                         "distribution": "truncated_normal"}})");
}
Value dense_kernel_initializer() {
  return json::parse(R"({"class_name": "VarianceScaling", "config": {"scale": 0.3333333333333333,
                         "mode": "fan_out", "distribution": "uniform"}})");
}

class EfficientNetBuilder {
 public:
  explicit EfficientNetBuilder(Model& m) : b_(m) {}

  KerasLayerBuilder& keras() { return b_; }

  std::string conv(const std::string& name, const std::string& from, int64_t filters, int64_t kernel, int64_t stride,
                   const char* padding, bool bias, const char* activation = "linear") {
    return b_.add("Conv2D", name,
                  {{"filters", Value(filters)}, {"kernel_size", Value(kernel)}, {"strides", Value(stride)},
                   {"padding", Value(padding)}, {"use_bias", Value(bias)}, {"activation", Value(activation)},
                   {"kernel_initializer", conv_kernel_initializer()}},
                  {from});
  }
  // Keras's BatchNormalization defaults (epsilon 1e-3, momentum 0.99), which EfficientNet keeps.
  std::string batch_norm(const std::string& name, const std::string& from) {
    return b_.add("BatchNormalization", name, {{"epsilon", Value(1e-3)}, {"momentum", Value(0.99)}}, {from});
  }
  std::string swish(const std::string& name, const std::string& from) {
    return b_.add("Activation", name, {{"activation", Value("swish")}}, {from});
  }
  // imagenet_utils.correct_pad: for an even size, one row (column) less on top (left).
  std::string correct_pad(const std::string& name, const std::string& from, int64_t kernel, int64_t h, int64_t w) {
    const int64_t c = kernel / 2;
    return b_.add("ZeroPadding2D", name,
                  {{"padding", Value(Value::Array{pair(c - (1 - h % 2), c), pair(c - (1 - w % 2), c)})}}, {from});
  }

  // Keras's efficientnet.block: expansion, depthwise convolution, squeeze-and-excite, projection and,
  // where shapes allow, drop-connect and the residual sum. h and w are the input's and become the output's.
  std::string block(const std::string& input, const std::string& prefix, const BlockArgs& a, int64_t filters_in,
                    int64_t strides, double drop_rate, int64_t& h, int64_t& w) {
    const int64_t filters = filters_in * a.expand_ratio;
    std::string x = input;
    if (a.expand_ratio != 1) {
      x = conv(prefix + "expand_conv", x, filters, 1, 1, "same", false);
      x = swish(prefix + "expand_activation", batch_norm(prefix + "expand_bn", x));
    }
    if (strides == 2) x = correct_pad(prefix + "dwconv_pad", x, a.kernel, h, w);
    x = b_.add("DepthwiseConv2D", prefix + "dwconv",
               {{"kernel_size", Value(a.kernel)}, {"strides", Value(strides)},
                {"padding", Value(strides == 2 ? "valid" : "same")}, {"use_bias", Value(false)},
                {"depthwise_initializer", conv_kernel_initializer()}},
               {x});
    x = swish(prefix + "activation", batch_norm(prefix + "bn", x));
    const int64_t filters_se = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(filters_in) * kSeRatio));
    std::string se = b_.add("GlobalAveragePooling2D", prefix + "se_squeeze", {}, {x});
    se = b_.add("Reshape", prefix + "se_reshape",
                {{"target_shape", Value(Value::Array{Value(int64_t{1}), Value(int64_t{1}), Value(filters)})}}, {se});
    se = conv(prefix + "se_reduce", se, filters_se, 1, 1, "same", true, "swish");
    se = conv(prefix + "se_expand", se, filters, 1, 1, "same", true, "sigmoid");
    x = b_.add("Multiply", prefix + "se_excite", {}, {x, se});
    x = batch_norm(prefix + "project_bn", conv(prefix + "project_conv", x, a.filters_out, 1, 1, "same", false));
    if (strides == 2) h = (h + 1) / 2, w = (w + 1) / 2;
    if (strides == 1 && filters_in == a.filters_out) {
      if (drop_rate > 0)
        x = b_.add("Dropout", prefix + "drop",
                   {{"rate", Value(drop_rate)},
                    {"noise_shape", Value(Value::Array{Value(), Value(int64_t{1}), Value(int64_t{1}), Value(int64_t{1})})}},
                   {x});
      x = b_.add("Add", prefix + "add", {}, {x, input});
    }
    return x;
  }

 private:
  KerasLayerBuilder b_;
};

}  // namespace

Model efficientnet_b0(const Strategy& strategy, const EfficientNetOptions& o) {
  const Shape& in = o.input_shape;
  require(in.size() == 3 && in[0] >= 32 && in[1] >= 32 && in[2] > 0, Status::InvalidArgument,
          "EfficientNetB0 needs inputs of shape (height, width, channels), at least 32x32; got " + to_string(in));
  require(!o.include_top || o.classes > 0, Status::InvalidArgument, "EfficientNetB0 needs at least one class");
  require(o.pooling.empty() || o.pooling == "avg" || o.pooling == "max", Status::InvalidArgument,
          "EfficientNetB0 pooling \"" + o.pooling + "\": none, \"avg\" or \"max\"");
  Model m = Model::functional(strategy, in, "input_layer");
  EfficientNetBuilder b(m);
  KerasLayerBuilder& k = b.keras();
  std::string x = k.add("Rescaling", k.auto_name("rescaling"), {{"scale", Value(1.0 / 255.0)}, {"offset", Value(0.0)}},
                        {"input_layer"});
  // Adapted statistics (mean and variance null): Keras's weight files carry them.
  x = k.add("Normalization", k.auto_name("normalization"),
            {{"axis", Value(int64_t{-1})}, {"mean", Value()}, {"variance", Value()}}, {x});
  int64_t h = in[0], w = in[1];
  x = b.correct_pad("stem_conv_pad", x, 3, h, w);
  x = b.swish("stem_activation", b.batch_norm("stem_bn", b.conv("stem_conv", x, 32, 3, 2, "valid", false)));
  h = (h + 1) / 2, w = (w + 1) / 2;
  int64_t total = 0;
  for (const BlockArgs& a : kB0Blocks) total += a.repeats;
  int64_t index = 0;
  for (size_t i = 0; i < std::size(kB0Blocks); ++i) {
    const BlockArgs& a = kB0Blocks[i];
    for (int64_t j = 0; j < a.repeats; ++j, ++index) {
      const std::string prefix = "block" + std::to_string(i + 1) + static_cast<char>('a' + j) + "_";
      const double drop_rate = kDropConnectRate * static_cast<double>(index) / static_cast<double>(total);
      x = b.block(x, prefix, a, j == 0 ? a.filters_in : a.filters_out, j == 0 ? a.strides : 1, drop_rate, h, w);
    }
  }
  x = b.swish("top_activation", b.batch_norm("top_bn", b.conv("top_conv", x, 1280, 1, 1, "same", false)));
  if (o.include_top) {
    x = k.add("GlobalAveragePooling2D", "avg_pool", {}, {x});
    x = k.add("Dropout", "top_dropout", {{"rate", Value(kTopDropoutRate)}}, {x});
    k.add("Dense", "predictions",
          {{"units", Value(o.classes)}, {"activation", Value(o.classifier_activation)},
           {"kernel_initializer", dense_kernel_initializer()}},
          {x});
  } else {
    k.pooling_tail(o.pooling, x, "avg_pool", "max_pool");
  }
  return m;
}

}  // namespace kx::applications
