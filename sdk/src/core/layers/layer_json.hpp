// Readers of the settings several layers share in Keras's JSON configs: sizes given as one number or
// a pair, padding names and activation names.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "io/json.hpp"
#include "kx/layer.hpp"

namespace kx::core {

// [a, b] or a single number a (Keras accepts both for sizes and strides).
std::pair<int64_t, int64_t> size_pair_from_json(const json::Value& v, const std::string& what);
// [a] or a single number a: a 1-D layer's size, stride or dilation.
int64_t size_from_json(const json::Value& v, const std::string& what);
// "valid" or "same"; InvalidArgument naming `what` for any other name.
Padding padding_from_name(const std::string& name, const std::string& what);
// An activation's name, or null for none; `what` names the setting ("Dense \"d\" activation").
Activation activation_from_json(const json::Value& v, const std::string& what);
// A global pooling layer's keepdims from its Keras config (false without one); Unsupported for a
// data_format other than channels_last.
bool global_pooling_keepdims(const LayerSpec& spec, const char* class_name);

}  // namespace kx::core
