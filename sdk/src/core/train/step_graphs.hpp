// The training step recorded once as a graph (CUDA graph) and replayed at every step that has the same
// shape: one launch instead of a hundred. A replayed step reads what changes from step to step from
// memory (StepValues, the batch index); everything else it was recorded with is in its key.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
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
  const float* w_src = nullptr;  // its sample weights (null: none)
  bool operator==(const StepGraphKey&) const = default;
};

class StepGraphCache {
 public:
  // Runs body on be: directly the first time key is seen, then recorded once and replayed; directly
  // always when recording is off or be cannot record. Takes body by reference: a step allocates nothing.
  // A recording that runs out of memory throws Status::OutOfMemory (nothing of body ran, and a later
  // call tries again); one that fails otherwise turns recording off for good (failure() says why) and
  // body runs directly.
  template <class Body>
  void run(backend::Backend& be, const StepGraphKey& key, bool allowed, Body&& body) {
    if (!allowed || off_) {
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
    if (!seen->second && !record(be, *seen, body)) {
      body();
      return;
    }
    seen->second->launch();
  }
  // Whether run(be, key, allowed, ...) would record now.
  bool recording_due(const StepGraphKey& key, bool allowed) {
    const Entry* seen = allowed && !off_ ? find(key) : nullptr;
    return seen && !seen->second;
  }
  // Records body for key now when run would record it, so that run then only replays it: replicas that
  // meet in a collective record first, all of them, and a recording that throws leaves none waiting.
  template <class Body>
  void record_if_due(backend::Backend& be, const StepGraphKey& key, bool allowed, Body&& body) {
    if (recording_due(key, allowed)) record(be, *find(key), body);
  }
  size_t size() const { return graphs_.size(); }  // the shapes seen (recorded or not yet)
  // Destroys every recorded graph and forgets the shapes seen, before what the graphs hold goes (a
  // collective's communicator).
  void clear() noexcept { graphs_.clear(); }
  // Why recording was turned off, when a recording failed; "" otherwise.
  const std::string& failure() const { return failure_; }

 private:
  // A shape seen, with its graph once recorded.
  using Entry = std::pair<StepGraphKey, std::unique_ptr<backend::StepGraph>>;
  Entry* find(const StepGraphKey& key);
  // A new shape, not recorded yet, in place of the oldest when the cache is full.
  void add(const StepGraphKey& key);
  // Records body into e; false (recording off from now on) when be cannot or the recording failed.
  template <class Body>
  bool record(backend::Backend& be, Entry& e, Body& body) {
    // A backend's capture reports a body that throws as "could not record"; what was thrown is kept
    // here, so that running out of memory is not mistaken for that.
    std::exception_ptr thrown;
    auto watched = [&] {
      try {
        body();
      } catch (...) {
        thrown = std::current_exception();
        throw;
      }
    };
    try {
      e.second = be.capture(std::function<void()>(std::ref(watched)));
    } catch (...) {
      thrown = std::current_exception();
    }
    if (e.second) {
      count_recording();
      return true;
    }
    if (thrown) recording_failed(thrown);
    off_ = true;
    return false;
  }
  // Rethrows `thrown` as Status::OutOfMemory when it is one; otherwise keeps its message in failure_.
  void recording_failed(const std::exception_ptr& thrown);
  // Counts a graph recorded, for the tests that compare replayed steps with direct ones
  // (config::TestHooks::step_graphs_recorded): a replay that never happened must not pass as equal.
  static void count_recording() noexcept;

  // A full batch and the short last one stay, whatever else comes between.
  static constexpr size_t kMaxGraphs = 4;
  std::vector<Entry> graphs_;
  bool off_ = false;  // be could not record once, or failed to: it is not asked again
  std::string failure_;
};

}  // namespace kx::core
