// Layer descriptions of the C++ API: what a model is made of (the computation lives in sdk/src/core).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kx/layer_list.hpp"

namespace kx {

// Keras 3's activations by their names (activation_name): relu6, silu (alias swish), hard_silu (alias
// hard_swish), hard_sigmoid (relu6(x + 3) / 6), gelu (the erf form, Keras's default), gelu with
// approximate=True (the tanh form, which only the gelu op's config can ask for), elu (alpha 1),
// leaky_relu (negative slope 0.2) and softplus.
enum class Activation {
  None = 0,
  Relu = 1,
  Sigmoid = 2,
  Tanh = 3,
  Softmax = 4,
  Relu6 = 5,
  Silu = 6,
  HardSilu = 7,
  HardSigmoid = 8,
  Gelu = 9,
  GeluTanh = 10,
  Elu = 11,
  LeakyRelu = 12,
  Softplus = 13,
};
// How many activations there are: a new one goes last, and is named here.
inline constexpr int kActivationCount = static_cast<int>(Activation::Softplus) + 1;
constexpr bool is_valid(Activation a) {
  return static_cast<int>(a) >= 0 && static_cast<int>(a) < kActivationCount;
}

const char* activation_name(Activation a);
// "relu" -> Relu ... (Keras's aliases too: "swish", "hard_swish"); throws InvalidArgument for an
// unknown name. GeluTanh has no name in Keras: activation_name gives "gelu_approximate", which
// activation_from_name refuses (the gelu op node with approximate=True is its only source).
Activation activation_from_name(const std::string& name);

// Every layer kx has, in the order of kx/layer_list.hpp (a new layer is a row there).
enum class LayerKind {
#define KX_LAYER_KIND(kind, ...) kind,
  KX_LAYERS(KX_LAYER_KIND)
#undef KX_LAYER_KIND
};
#define KX_COUNT_LAYER(...) +1
inline constexpr int kLayerKindCount = 0 KX_LAYERS(KX_COUNT_LAYER);
#undef KX_COUNT_LAYER
// The Keras class name of layer kind number index, or null past the last.
const char* layer_class_name(size_t index);
constexpr bool is_valid(LayerKind k) { return static_cast<int>(k) >= 0 && static_cast<int>(k) < kLayerKindCount; }

// Keras's padding: "valid" (no padding) or "same" (output size = ceil(input / stride)).
enum class Padding { Valid = 0, Same = 1 };

struct LayerSpec {
  LayerKind kind = LayerKind::Dense;
  std::string name;            // unique in the model; generated ("dense_1") when empty
  int64_t units = 0;           // Dense
  Activation activation = Activation::None;  // Dense, Conv2D
  float rate = 0.0f;           // Dropout
  int64_t filters = 0;         // Conv2D
  int64_t kernel_h = 0, kernel_w = 0;  // Conv2D
  int64_t stride = 1;          // Conv2D (both directions)
  Padding padding = Padding::Valid;    // Conv2D
  int64_t pool_h = 2, pool_w = 2;      // MaxPooling2D, AveragePooling2D
  int64_t pool_stride_h = 0, pool_stride_w = 0;  // pooling strides; 0: the pool size (Keras's default)
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // ZeroPadding2D
  // BatchNormalization, Concatenate: the axis, counting the batch as axis 0 as Keras does; only the
  // last (-1, or the sample rank) is supported.
  int64_t axis = -1;
  // BatchNormalization (Keras's defaults), in double as Keras holds them: 1 - momentum is computed in
  // double, then rounded to float32, as Keras 3 does.
  double momentum = 0.99;
  double epsilon = 1e-3;
  // Normalization: the statistics per channel (last axis), or one value for every channel.
  std::vector<float> mean, variance;
  bool trainable = true;       // false: the layer's weights stay as they are (BatchNormalization then
                               // normalises with its moving statistics, as Keras does)
  bool use_bias = true;        // Dense, Conv2D: false leaves the bias out (Keras's use_bias), e.g. before
                               // a BatchNormalization, whose beta takes its place
  // The layer's Keras "config" object as JSON text ("{}" or empty: Keras's defaults). Layers whose
  // settings have no field above read them from here (their factory does); when the layer comes from
  // JSON it holds that layer's whole config.
  std::string config;
  // The keyword arguments of the layer's call as JSON (a functional config's inbound node "kwargs",
  // tensors left out): MultiHeadAttention's use_causal_mask. Empty: none.
  std::string call_config;
};

}  // namespace kx
