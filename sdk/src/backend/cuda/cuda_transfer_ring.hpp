// Batches copied from page-locked host memory on a stream of their own, overlapped with the replica's
// compute: events order each copy after the compute that last read its device slot, and the compute
// after the copy.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "backend/backend.hpp"

namespace kx::backend::cuda {

// A TransferRing whose device slots come from be (memory of `device`), feeding `compute`.
std::unique_ptr<TransferRing> make_cuda_transfer_ring(Backend& be, int device,
                                                      cudaStream_t compute, int slots, size_t slot_bytes);

}  // namespace kx::backend::cuda
