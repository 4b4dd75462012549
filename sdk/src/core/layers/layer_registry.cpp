#include "core/layers/layer_registry.hpp"

#include <iterator>

#include "kx/error.hpp"

namespace kx::core {

// Each layer's reader and factory, defined in the layer's own .cpp beside its JSON writer.
#define KX_DECLARE_LAYER_FUNCTIONS(kind, class_name, stem, reader, factory) \
  void reader(const json::Value&, const std::string&, LayerSpec&);          \
  std::unique_ptr<Layer> factory(const LayerSpec&);
KX_LAYERS(KX_DECLARE_LAYER_FUNCTIONS)
#undef KX_DECLARE_LAYER_FUNCTIONS

void read_no_config(const json::Value&, const std::string&, LayerSpec&) {}

namespace {

// One row per LayerKind, in its order, made from kx/layer_list.hpp.
constexpr LayerEntry kLayers[] = {
#define KX_LAYER_ROW(kind, class_name, stem, reader, factory) {LayerKind::kind, class_name, stem, reader, factory},
    KX_LAYERS(KX_LAYER_ROW)
#undef KX_LAYER_ROW
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

}  // namespace kx::core

namespace kx {
const char* layer_class_name(size_t index) {
  return index < std::size(core::kLayers) ? core::kLayers[index].class_name : nullptr;
}
}  // namespace kx

namespace kx::core {

const LayerEntry* find_layer_entry(std::string_view class_name) {
  for (const LayerEntry& e : kLayers)
    if (class_name == e.class_name) return &e;
  return nullptr;
}

}  // namespace kx::core
