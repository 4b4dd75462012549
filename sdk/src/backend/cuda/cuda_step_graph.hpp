// A training step recorded from a stream into a CUDA graph and replayed with one launch.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "backend/backend.hpp"

namespace kx::backend::cuda {

// Records what body queues on `stream` (of `device`) and instantiates it; null when the capture failed
// (an operation that cannot be captured, body throwing): nothing ran then, the stream is usable again
// and the error state is cleared. A body failing for lack of memory rethrows its error.
std::unique_ptr<StepGraph> capture_step(int device, cudaStream_t stream, const std::function<void()>& body);

}  // namespace kx::backend::cuda
