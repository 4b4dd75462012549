#include "core/train/step_graphs.hpp"

#include <new>

#include "config/test_hooks.hpp"
#include "kx/error.hpp"

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

void StepGraphCache::count_recording() noexcept { ++config::test_hooks().step_graphs_recorded; }

void StepGraphCache::recording_failed(const std::exception_ptr& thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const Error& e) {
    if (e.status() == Status::OutOfMemory) throw;
    failure_ = e.what();
  } catch (const std::bad_alloc&) {
    fail(Status::OutOfMemory, "out of host memory while recording the training step");
  } catch (const std::exception& e) {
    failure_ = e.what();
  } catch (...) {
    failure_ = "an unknown error";
  }
}

}  // namespace kx::core
