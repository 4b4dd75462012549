#include "core/model/keras_weights.hpp"

#include <map>

#include "kx/error.hpp"

namespace kx::core {

namespace {

// The group a legacy file's layers are under: the root of a save_weights file, model_weights of a
// model.save file; nullopt when the file is not of that layout.
std::optional<std::string> legacy_root(const io::Hdf5Tree& f) {
  if (f.strings("", "layer_names")) return std::string();
  if (f.is_group("model_weights") && f.strings("model_weights", "layer_names")) return std::string("model_weights");
  return std::nullopt;
}

std::string join(const std::string& root, const std::string& name) { return root.empty() ? name : root + "/" + name; }

}  // namespace

std::vector<std::string> keras3_layer_groups(const std::vector<KerasLayerWeights>& layers) {
  std::map<std::string, int> used;  // Keras's _get_unique_name
  std::vector<std::string> groups;
  for (const KerasLayerWeights& l : layers) {
    const auto [it, fresh] = used.try_emplace(l.stem, 0);
    if (!fresh) ++it->second;
    groups.push_back("layers/" + (fresh ? l.stem : l.stem + "_" + std::to_string(it->second)));
  }
  return groups;
}

std::vector<std::vector<std::string>> keras_weight_paths(const io::Hdf5Tree& f,
                                                         const std::vector<KerasLayerWeights>& layers) {
  std::vector<std::vector<std::string>> paths;
  if (const std::optional<std::string> root = legacy_root(f)) {
    for (const KerasLayerWeights& l : layers) {
      std::vector<std::string>& p = paths.emplace_back(l.weights.size());
      const std::string group = join(*root, l.name);
      if (l.weights.empty() || !f.is_group(group)) continue;
      const std::vector<std::string> names = f.strings(group, "weight_names").value_or(std::vector<std::string>{});
      // As Keras's legacy loader: the layer's weights in order (trainable, then the rest).
      for (size_t i = 0; i < p.size() && i < names.size(); ++i) p[i] = group + "/" + names[i];
    }
    return paths;
  }
  std::map<std::string, std::string> by_name;  // Keras 3.6 on: each vars group names its layer
  if (f.is_group("layers"))
    for (const std::string& child : f.children("layers")) {
      const std::string vars = "layers/" + child + "/vars";
      if (!f.is_group(vars)) continue;
      if (const auto name = f.strings(vars, "name"); name && name->size() == 1) by_name.emplace(name->front(), "layers/" + child);
    }
  const std::vector<std::string> derived = keras3_layer_groups(layers);
  for (size_t k = 0; k < layers.size(); ++k) {
    std::vector<std::string>& p = paths.emplace_back(layers[k].weights.size());
    std::string group = derived[k];
    if (!by_name.empty()) {
      const auto it = by_name.find(layers[k].name);
      if (it == by_name.end()) continue;
      group = it->second;
    }
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string& inside = layers[k].weights[i].keras_path;
      p[i] = group + "/" + (inside.empty() ? "vars/" + std::to_string(i) : inside);
    }
  }
  return paths;
}

std::optional<KerasOptimizerPaths> keras_optimizer_paths(const io::Hdf5Tree& f, size_t trained, int slots) {
  KerasOptimizerPaths out;
  out.slots.assign(static_cast<size_t>(slots), std::vector<std::string>(trained));
  const size_t s = static_cast<size_t>(slots);
  if (f.is_group("optimizer/vars")) {  // Keras 3: 0 iterations, 1 learning rate, then per weight its slots
    const size_t n = f.children("optimizer/vars").size();
    if (n != 2 + s * trained) return std::nullopt;
    const auto var = [](size_t i) { return "optimizer/vars/" + std::to_string(i); };
    out.iterations = var(0);
    out.learning_rate = var(1);
    for (size_t i = 0; i < trained; ++i)
      for (size_t j = 0; j < s; ++j) out.slots[j][i] = var(2 + i * s + j);
    return out;
  }
  if (!f.is_group("optimizer_weights")) return std::nullopt;
  const std::vector<std::string> names = f.strings("optimizer_weights", "weight_names").value_or(std::vector<std::string>{});
  const auto var = [&](size_t i) { return "optimizer_weights/" + names[i]; };
  if (names.size() == 2 + s * trained) {  // Keras 3's legacy .h5: the same order as its .keras
    out.iterations = var(0);
    out.learning_rate = var(1);
    for (size_t i = 0; i < trained; ++i)
      for (size_t j = 0; j < s; ++j) out.slots[j][i] = var(2 + i * s + j);
    return out;
  }
  if (names.size() == 1 + s * trained) {  // Keras 2: iterations, then every weight's first slot, ...
    out.iterations = var(0);
    for (size_t j = 0; j < s; ++j)
      for (size_t i = 0; i < trained; ++i) out.slots[j][i] = var(1 + j * trained + i);
    return out;
  }
  return std::nullopt;
}

}  // namespace kx::core
