// The one table of layers, made from kx/layer_list.hpp: for every LayerKind, its Keras class name,
// the stem of its generated names, its JSON reader and its factory. Adding a layer is a row in that
// list and the layer's own .cpp (its class, reader and factory); static_asserts in
// layer_registry.cpp keep the table in LayerKind's order with distinct class names.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "core/layers/layer.hpp"
#include "io/json.hpp"
#include "kx/layer.hpp"

namespace kx::core {

// Reads a layer's own settings from its Keras "config" object into spec (kind, name and trainable
// are set already). `what` names the layer in messages: Dense "dense_1".
using LayerConfigReader = void (*)(const json::Value& config, const std::string& what, LayerSpec& spec);
// Checks spec's settings (InvalidArgument naming what is wrong) and makes the layer, unbuilt.
using LayerFactory = std::unique_ptr<Layer> (*)(const LayerSpec& spec);

struct LayerEntry {
  LayerKind kind;
  const char* class_name;  // Keras's class_name, in JSON and messages
  const char* name_stem;   // generated layer names: stem, stem_1, stem_2 ... (Keras's)
  LayerConfigReader read_config;
  LayerFactory make;
};

// The row of a kind; Internal for a value outside LayerKind.
const LayerEntry& layer_entry(LayerKind kind);
// The row of a Keras class name, or null when kx has no such layer.
const LayerEntry* find_layer_entry(std::string_view class_name);

}  // namespace kx::core
