// Keras's weight initializers as layer configs carry them (kernel_initializer, depthwise_initializer,
// bias_initializer): a name ("he_normal") or {"class_name", "config"}. kx draws VarianceScaling and the
// named forms of it (GlorotUniform/Normal, HeUniform/Normal, LecunUniform/Normal), RandomUniform,
// RandomNormal, TruncatedNormal, Zeros, Ones and Constant with Keras's formulas and fans, from its own
// generator (a config's seed is not Keras's stream, so it is kept but not followed).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"

namespace kx::core {

// The initializer under `key` of the layer's Keras config (spec.config), as Keras writes it
// ({"module", "class_name", "config", "registered_name"}) in JSON text; "" where the config has none
// (the layer's own default then). Unsupported for an initializer kx cannot draw (Orthogonal, custom),
// InvalidArgument for a bad setting, each naming the layer and the key.
std::string keras_initializer_setting(const LayerSpec& spec, const char* key);

// Writes it back under `key` when the layer has one.
void add_keras_initializer(json::Value& config, const char* key, const std::string& initializer);

// Fills the n = num_elements(shape) values of a weight of this shape (Keras's fans: the last two axes
// times the receptive field) from the initializer's JSON text, drawing value j from (seed, j).
void fill_keras_initializer(const std::string& initializer, const Shape& shape, uint64_t seed, float* values);

// A convolution's or Dense's two: the kernel's (under kernel_key: DepthwiseConv2D's is
// depthwise_initializer) and the bias's.
struct KernelAndBiasInitializers {
  explicit KernelAndBiasInitializers(const LayerSpec& spec, const char* key = "kernel_initializer");
  // params: the kernel first, then the bias if there is one.
  std::vector<ParamSpec> applied(std::vector<ParamSpec> params) const;
  void add_to(json::Value& config) const;

  const char* kernel_key;
  std::string kernel, bias;
};

}  // namespace kx::core
