#include "core/layers/layer_registry.hpp"

#include <iterator>

#include "kx/error.hpp"

namespace kx::core {

// Each layer's reader and factory, defined in the layer's own .cpp beside its JSON writer.
void read_dense_config(const json::Value&, const std::string&, LayerSpec&);
void read_dropout_config(const json::Value&, const std::string&, LayerSpec&);
void read_conv2d_config(const json::Value&, const std::string&, LayerSpec&);
void read_pooling2d_config(const json::Value&, const std::string&, LayerSpec&);
void read_global_average_pooling2d_config(const json::Value&, const std::string&, LayerSpec&);
void read_zero_padding2d_config(const json::Value&, const std::string&, LayerSpec&);
void read_normalization_config(const json::Value&, const std::string&, LayerSpec&);
void read_batch_normalization_config(const json::Value&, const std::string&, LayerSpec&);
void read_concatenate_config(const json::Value&, const std::string&, LayerSpec&);
void read_activation_config(const json::Value&, const std::string&, LayerSpec&);

std::unique_ptr<Layer> make_dense_layer(const LayerSpec&);
std::unique_ptr<Layer> make_flatten_layer(const LayerSpec&);
std::unique_ptr<Layer> make_dropout_layer(const LayerSpec&);
std::unique_ptr<Layer> make_conv2d_layer(const LayerSpec&);
std::unique_ptr<Layer> make_max_pooling2d_layer(const LayerSpec&);
std::unique_ptr<Layer> make_average_pooling2d_layer(const LayerSpec&);
std::unique_ptr<Layer> make_global_average_pooling2d_layer(const LayerSpec&);
std::unique_ptr<Layer> make_zero_padding2d_layer(const LayerSpec&);
std::unique_ptr<Layer> make_normalization_layer(const LayerSpec&);
std::unique_ptr<Layer> make_batch_normalization_layer(const LayerSpec&);
std::unique_ptr<Layer> make_add_layer(const LayerSpec&);
std::unique_ptr<Layer> make_concatenate_layer(const LayerSpec&);
std::unique_ptr<Layer> make_activation_layer(const LayerSpec&);

namespace {

// One row per LayerKind, in its order. A null reader: the layer has no settings of its own.
constexpr LayerEntry kLayers[] = {
    {LayerKind::Dense, "Dense", "dense", read_dense_config, make_dense_layer},
    {LayerKind::Flatten, "Flatten", "flatten", nullptr, make_flatten_layer},
    {LayerKind::Dropout, "Dropout", "dropout", read_dropout_config, make_dropout_layer},
    {LayerKind::Conv2D, "Conv2D", "conv2d", read_conv2d_config, make_conv2d_layer},
    {LayerKind::MaxPooling2D, "MaxPooling2D", "max_pooling2d", read_pooling2d_config, make_max_pooling2d_layer},
    {LayerKind::AveragePooling2D, "AveragePooling2D", "average_pooling2d", read_pooling2d_config,
     make_average_pooling2d_layer},
    {LayerKind::GlobalAveragePooling2D, "GlobalAveragePooling2D", "global_average_pooling2d",
     read_global_average_pooling2d_config, make_global_average_pooling2d_layer},
    {LayerKind::ZeroPadding2D, "ZeroPadding2D", "zero_padding2d", read_zero_padding2d_config,
     make_zero_padding2d_layer},
    {LayerKind::Normalization, "Normalization", "normalization", read_normalization_config,
     make_normalization_layer},
    {LayerKind::BatchNormalization, "BatchNormalization", "batch_normalization", read_batch_normalization_config,
     make_batch_normalization_layer},
    {LayerKind::Add, "Add", "add", nullptr, make_add_layer},
    {LayerKind::Concatenate, "Concatenate", "concatenate", read_concatenate_config, make_concatenate_layer},
    {LayerKind::Activation, "Activation", "activation", read_activation_config, make_activation_layer},
};

constexpr bool rows_in_kind_order() {
  for (size_t i = 0; i < std::size(kLayers); ++i)
    if (static_cast<size_t>(kLayers[i].kind) != i) return false;
  return true;
}

constexpr bool class_names_distinct() {
  for (size_t i = 0; i < std::size(kLayers); ++i)
    for (size_t j = i + 1; j < std::size(kLayers); ++j)
      if (std::string_view(kLayers[i].class_name) == kLayers[j].class_name) return false;
  return true;
}

static_assert(std::size(kLayers) == static_cast<size_t>(kLayerKindCount),
              "kLayers needs exactly one row per LayerKind (and kLayerKindCount names the last kind)");
static_assert(rows_in_kind_order(), "kLayers lists the layer kinds in LayerKind's order");
static_assert(class_names_distinct(), "two rows of kLayers have the same class name");

}  // namespace

const LayerEntry& layer_entry(LayerKind kind) {
  if (!is_valid(kind)) fail(Status::Internal, "unknown layer kind");
  return kLayers[static_cast<size_t>(kind)];
}

const LayerEntry* find_layer_entry(std::string_view class_name) {
  for (const LayerEntry& e : kLayers)
    if (class_name == e.class_name) return &e;
  return nullptr;
}

}  // namespace kx::core
