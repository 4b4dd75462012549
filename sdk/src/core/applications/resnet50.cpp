// ResNet50 as keras.applications.ResNet50 builds it, layer for layer and name for name, so weights
// saved from Keras by name load into it.
#include <string>
#include <vector>

#include "kx/applications.hpp"
#include "kx/error.hpp"

namespace kx::applications {
namespace {

constexpr float kBatchNormEpsilon = 1.001e-5f;

class ResNetBuilder {
 public:
  explicit ResNetBuilder(Model& m) : m_(m) {}

  // Adds a layer reading `from` and returns its name.
  std::string add(LayerSpec spec, const std::vector<std::string>& from) {
    m_.add(spec, from);
    return spec.name;
  }
  std::string conv(const std::string& name, const std::string& from, int64_t filters, int64_t kernel, int64_t stride,
                   Padding padding = Padding::Valid) {
    LayerSpec s;
    s.kind = LayerKind::Conv2D;
    s.name = name;
    s.filters = filters;
    s.kernel_h = s.kernel_w = kernel;
    s.stride = stride;
    s.padding = padding;
    return add(s, {from});
  }
  std::string batch_norm(const std::string& name, const std::string& from) {
    LayerSpec s;
    s.kind = LayerKind::BatchNormalization;
    s.name = name;
    s.epsilon = kBatchNormEpsilon;
    return add(s, {from});
  }
  std::string relu(const std::string& name, const std::string& from) {
    LayerSpec s;
    s.kind = LayerKind::Activation;
    s.name = name;
    s.activation = Activation::Relu;
    return add(s, {from});
  }
  std::string pad(const std::string& name, const std::string& from, int64_t p) {
    LayerSpec s;
    s.kind = LayerKind::ZeroPadding2D;
    s.name = name;
    s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = p;
    return add(s, {from});
  }

  // Keras's block1: a bottleneck of 1x1, kxk, 1x1 convolutions plus a shortcut (projected when
  // conv_shortcut).
  std::string block(const std::string& x, int64_t filters, int64_t stride, bool conv_shortcut, const std::string& name) {
    std::string shortcut = x;
    if (conv_shortcut) shortcut = batch_norm(name + "_0_bn", conv(name + "_0_conv", x, 4 * filters, 1, stride));
    std::string y = relu(name + "_1_relu", batch_norm(name + "_1_bn", conv(name + "_1_conv", x, filters, 1, stride)));
    y = relu(name + "_2_relu", batch_norm(name + "_2_bn", conv(name + "_2_conv", y, filters, 3, 1, Padding::Same)));
    y = batch_norm(name + "_3_bn", conv(name + "_3_conv", y, 4 * filters, 1, 1));
    LayerSpec sum;
    sum.kind = LayerKind::Add;
    sum.name = name + "_add";
    return relu(name + "_out", add(sum, {shortcut, y}));
  }

  std::string stack(const std::string& x, int64_t filters, int blocks, int64_t stride, const std::string& name) {
    std::string y = block(x, filters, stride, true, name + "_block1");
    for (int i = 2; i <= blocks; ++i) y = block(y, filters, 1, false, name + "_block" + std::to_string(i));
    return y;
  }

 private:
  Model& m_;
};

}  // namespace

Model resnet50(const Strategy& strategy, const Shape& input_shape, bool include_top, int64_t classes) {
  require(input_shape.size() == 3 && input_shape[0] >= 32 && input_shape[1] >= 32 && input_shape[2] > 0,
          Status::InvalidArgument, "ResNet50 needs inputs of shape (height, width, channels), at least 32x32; got " +
                                       to_string(input_shape));
  require(!include_top || classes > 0, Status::InvalidArgument, "ResNet50 needs at least one class");
  Model m = Model::functional(strategy, input_shape, "input_layer");
  ResNetBuilder b(m);
  std::string x = b.pad("conv1_pad", "input_layer", 3);
  x = b.relu("conv1_relu", b.batch_norm("conv1_bn", b.conv("conv1_conv", x, 64, 7, 2)));
  x = b.pad("pool1_pad", x, 1);
  LayerSpec pool;
  pool.kind = LayerKind::MaxPooling2D;
  pool.name = "pool1_pool";
  pool.pool_h = pool.pool_w = 3;
  pool.pool_stride_h = pool.pool_stride_w = 2;
  x = b.add(pool, {x});
  x = b.stack(x, 64, 3, 1, "conv2");
  x = b.stack(x, 128, 4, 2, "conv3");
  x = b.stack(x, 256, 6, 2, "conv4");
  x = b.stack(x, 512, 3, 2, "conv5");
  if (include_top) {
    LayerSpec gap;
    gap.kind = LayerKind::GlobalAveragePooling2D;
    gap.name = "avg_pool";
    x = b.add(gap, {x});
    LayerSpec dense;
    dense.kind = LayerKind::Dense;
    dense.name = "predictions";
    dense.units = classes;
    dense.activation = Activation::Softmax;
    b.add(dense, {x});
  }
  return m;
}

}  // namespace kx::applications
