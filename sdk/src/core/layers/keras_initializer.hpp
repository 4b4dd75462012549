// Keras's weight initializers as layer configs carry them (kernel_initializer, depthwise_initializer,
// bias_initializer, gamma_initializer ...): a name ("he_normal") or {"class_name", "config"}. kx draws
// VarianceScaling and the named forms of it (GlorotUniform/Normal, HeUniform/Normal,
// LecunUniform/Normal), RandomUniform, RandomNormal, TruncatedNormal, Orthogonal, Zeros, Ones and
// Constant with Keras's formulas and fans, from its own generator (a config's seed is not Keras's
// stream, so it is kept but not followed).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/layers/layer.hpp"

namespace kx::core {

// The initializer under `key` of a layer's Keras config, as Keras writes it ({"module", "class_name",
// "config", "registered_name"}) in JSON text; "" where the config has none (the layer's own default
// then). Unsupported for an initializer kx cannot draw (Identity, custom), InvalidArgument for a bad
// setting, each naming `what` (the layer) and the key.
std::string keras_initializer_setting(const json::Value& config, const char* key, const std::string& what);
// The same from the layer's Keras config (spec.config).
std::string keras_initializer_setting(const LayerSpec& spec, const char* key);
// A VarianceScaling initializer given the axes of the units in and out (as Keras's EinsumDense gives
// its kernel's), unless it names axes itself; any other initializer as it is.
// The axes are JSON lists ("[0]", "[1, 2]").
std::string with_fan_axes(const std::string& initializer, const char* input_axes, const char* output_axes);
// A vector drawn in parts, each of `size` values with its own initializer and fans (LSTM's bias with
// unit_forget_bias: Keras draws the gates' parts apart).
std::string keras_initializer_parts(std::initializer_list<std::pair<std::string_view, int64_t>> parts);

// Writes it back under `key` when the layer has one.
void add_keras_initializer(json::Value& config, const char* key, const std::string& initializer);

// Fills the n = num_elements(shape) values of a weight of this shape (Keras's fans: the last two axes
// times the receptive field) from the initializer's JSON text, drawing value j from (seed, j);
// InvalidArgument naming `what` (the weight) for a shape the initializer cannot fill.
void fill_keras_initializer(const std::string& initializer, const Shape& shape, uint64_t seed, float* values,
                            const std::string& what);

// A layer's initializers: each weight named in `keys` ({config key, weight name}) takes the
// initializer its key holds in the layer's config, if any.
class KerasInitializers {
 public:
  KerasInitializers(const LayerSpec& spec, std::initializer_list<std::pair<const char*, const char*>> keys);
  std::vector<ParamSpec> applied(std::vector<ParamSpec> params) const;
  void add_to(json::Value& config) const;

 private:
  struct Entry {
    const char *key, *weight;
    std::string initializer;
  };
  std::vector<Entry> entries_;
};

// A convolution's or Dense's two: the kernel's (under kernel_key: DepthwiseConv2D's is
// depthwise_initializer) and the bias's.
struct KernelAndBiasInitializers : KerasInitializers {
  explicit KernelAndBiasInitializers(const LayerSpec& spec, const char* kernel_key = "kernel_initializer")
      : KerasInitializers(spec, {{kernel_key, "kernel"}, {"bias_initializer", "bias"}}) {}
};

}  // namespace kx::core
