// What other parts of the CUDA module need to know of a replica's backend: its device and stream.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "distribute/collective.hpp"

namespace kx::backend::cuda {

struct ReplicaStream {
  int device;
  cudaStream_t stream;
};

// The device and stream of a backend this module created; Status::Misuse for any other backend.
ReplicaStream replica_stream(Backend& be);

// NCCL between replicas on distinct GPUs (nccl_collective.cpp): the module's create_collective.
std::unique_ptr<distribute::Collective> create_nccl_collective(Backend* const* replicas, int count);

// NCCL between worker processes, one GPU each (nccl_worker_collective.cpp): why NCCL cannot be used
// here (empty when it can), the chief's new id (NCCL_UNIQUE_ID_BYTES), and each worker's collective.
std::string nccl_unavailable_reason();
void nccl_unique_id(char* id, size_t id_len);
std::unique_ptr<distribute::Collective> create_nccl_worker_collective(Backend& replica, const char* id, int rank,
                                                                      int size, int64_t timeout_ms);

}  // namespace kx::backend::cuda
