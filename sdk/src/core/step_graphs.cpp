#include "core/step_graphs.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kx::core {

void StepGraphCache::run(backend::Backend& be, const StepGraphKey& key, bool allowed,
                         const std::function<void()>& body) {
  if (!allowed || unsupported_) {
    body();
    return;
  }
  auto seen = std::find_if(graphs_.begin(), graphs_.end(), [&](const auto& g) { return g.first == key; });
  if (seen == graphs_.end()) {
    // The first step of a shape runs directly, as a warm-up: what it sets up once (GEMM plans, kernels
    // loaded on first use) is then not part of the recording.
    body();
    if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
    graphs_.emplace_back(key, nullptr);
    return;
  }
  if (!seen->second) {
    seen->second = be.capture(body);
    if (!seen->second) {
      unsupported_ = true;
      body();
      return;
    }
  }
  seen->second->launch();
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
