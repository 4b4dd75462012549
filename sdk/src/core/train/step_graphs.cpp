#include "core/train/step_graphs.hpp"

#include <cstdlib>
#include <cstring>

namespace kx::core {

StepGraphCache::Entry* StepGraphCache::find(const StepGraphKey& key) {
  for (Entry& e : graphs_)
    if (e.first == key) return &e;
  return nullptr;
}

void StepGraphCache::add(const StepGraphKey& key) {
  if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
  graphs_.emplace_back(key, nullptr);
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
