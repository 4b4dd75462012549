// CUDA graph semantics on any backend: capture() records the calls as closures with their arguments
// and launch() replays them. It lets the CPU tests check that a captured training step reads every
// value that changes between steps from memory (StepValues, the batch index) rather than from what was
// current when it was recorded.
#pragma once
#include <memory>

#include "backend/backend.hpp"

namespace kx::backend {

// Forwards every call to inner, except while capture() records.
std::unique_ptr<Backend> make_recording_backend(std::unique_ptr<Backend> inner);

}  // namespace kx::backend
