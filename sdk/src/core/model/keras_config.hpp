// Keras's own configs (a .keras file's config.json, a legacy .h5 file's model_config and
// training_config) made into what kx reads, and kx's back into what Keras 3 reads. Whatever such a
// config holds that kx cannot train is Unsupported naming the layer class, the op or the attribute,
// so a model is never loaded as something other than what Keras would train.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/json.hpp"
#include "kx/model.hpp"

namespace kx::core {

// The model config of a Keras file as kx's Model::from_json reads it. Keras 2 Sequential configs
// (no InputLayer, the first layer's batch_input_shape) get their InputLayer.
std::string model_config_from_keras(const json::Value& model);
// The dtype policy the layers of a Keras model config share (Unsupported when they differ).
Precision precision_from_keras(const json::Value& model);
// Compile options from Keras 3's compile_config or a legacy training_config (whose optimizer is
// under "optimizer_config"); nullopt for a null config (a model Keras never compiled).
std::optional<CompileOptions> compile_options_from_keras(const json::Value& config, Precision precision);

// kx's model JSON (Model::to_json) as Keras 3 writes a model's config: every object with the module
// Keras imports it from.
// keras_order: the layers (indices after the input) in the order Keras lists them; output_shapes:
// every layer's (and the input's) output shape per sample, by name (operation nodes write them).
json::Value keras_model_config(const json::Value& kx_model, const std::string& dtype_policy,
                               const std::vector<int>& keras_order, const std::map<std::string, Shape>& output_shapes);
// Keras 3's compile_config for these options.
json::Value keras_compile_config(const CompileOptions& options, const OptimizerConfig& resolved);

}  // namespace kx::core
