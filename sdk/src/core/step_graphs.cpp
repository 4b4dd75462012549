#include "core/step_graphs.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kx::core {

backend::StepGraph* StepGraphCache::find(const StepGraphKey& key) const {
  for (const auto& [k, graph] : graphs_)
    if (k == key) return graph.get();
  return nullptr;
}

bool StepGraphCache::seen(const StepGraphKey& key) const {
  return std::any_of(graphs_.begin(), graphs_.end(), [&](const auto& g) { return g.first == key; });
}

void StepGraphCache::remember(const StepGraphKey& key, std::unique_ptr<backend::StepGraph> graph) {
  auto same = std::find_if(graphs_.begin(), graphs_.end(), [&](const auto& g) { return g.first == key; });
  if (same != graphs_.end()) {
    same->second = std::move(graph);
    return;
  }
  if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
  graphs_.emplace_back(key, std::move(graph));
}

namespace {
const char* graphs_setting() {
  const char* v = std::getenv("KX_STEP_GRAPHS");
  return v ? v : "";
}
}  // namespace

bool step_graphs_enabled() {
  const char* v = graphs_setting();
  return std::strcmp(v, "0") != 0 && std::strcmp(v, "off") != 0;
}

bool step_graphs_emulated() { return std::strcmp(graphs_setting(), "emulate") == 0; }

}  // namespace kx::core
