#include "core/step_graphs.hpp"

#include <cstdlib>
#include <cstring>

namespace kx::core {

void StepGraphCache::run(backend::Backend& be, const StepGraphKey& key, bool allowed,
                         const std::function<void()>& body) {
  if (!allowed || unsupported_) {
    body();
    return;
  }
  for (auto& [k, graph] : graphs_)
    if (k == key) {
      graph->launch();
      return;
    }
  std::unique_ptr<backend::StepGraph> graph = be.capture(body);
  if (!graph) {
    unsupported_ = true;
    body();
    return;
  }
  if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
  graphs_.emplace_back(key, std::move(graph));
  graphs_.back().second->launch();
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
