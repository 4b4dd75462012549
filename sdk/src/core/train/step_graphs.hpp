// The training step recorded once as a graph (CUDA graph) and replayed at every step that has the same
// shape: one launch instead of a hundred. A replayed step reads what changes from step to step from
// memory (StepValues, the batch index); everything else it was recorded with is in its key.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.hpp"

namespace kx::core {

struct StepGraphKey {
  int part = 0;                  // which part of the step (all of it, or one side of the all-reduce)
  int64_t first = 0, rows = 0;   // the replica's slice of the global batch
  int64_t global_rows = 0;       // the loss is a mean over these
  uint64_t plan_generation = 0;  // the step plan's buffers
  uint64_t network_revision = 0; // which layers train
  const float* x_src = nullptr;  // the staged dataset
  const float* y_src = nullptr;
  bool operator==(const StepGraphKey&) const = default;
};

class StepGraphCache {
 public:
  // Runs body on be: directly the first time key is seen, then recorded once and replayed; directly
  // always when recording is off or be cannot record. Takes body by reference: a step allocates nothing.
  template <class Body>
  void run(backend::Backend& be, const StepGraphKey& key, bool allowed, Body&& body) {
    if (!allowed || unsupported_) {
      body();
      return;
    }
    Entry* seen = find(key);
    if (!seen) {
      // The first step of a shape runs directly, as a warm-up: what it sets up once (GEMM plans,
      // kernels loaded on first use) is then not part of the recording.
      body();
      add(key);
      return;
    }
    if (!seen->second) {
      seen->second = be.capture(std::function<void()>(std::ref(body)));
      if (!seen->second) {
        unsupported_ = true;
        body();
        return;
      }
    }
    seen->second->launch();
  }
  size_t size() const { return graphs_.size(); }  // the shapes seen (recorded or not yet)

 private:
  // A shape seen, with its graph once recorded.
  using Entry = std::pair<StepGraphKey, std::unique_ptr<backend::StepGraph>>;
  Entry* find(const StepGraphKey& key);
  // A new shape, not recorded yet, in place of the oldest when the cache is full.
  void add(const StepGraphKey& key);

  // A full batch and the short last one stay, whatever else comes between.
  static constexpr size_t kMaxGraphs = 4;
  std::vector<Entry> graphs_;
  bool unsupported_ = false;  // be could not record once: it is not asked again
};

// Whether steps are recorded as graphs: yes unless the environment says KX_STEP_GRAPHS=0 (to compare,
// or to debug a kernel one launch at a time).
bool step_graphs_enabled();
// KX_STEP_GRAPHS=emulate: backends that record no graphs themselves (the CPU) are wrapped so that they
// do, with the same semantics, for tests.
bool step_graphs_emulated();

}  // namespace kx::core
