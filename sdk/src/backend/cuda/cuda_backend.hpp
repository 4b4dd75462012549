// What other parts of the CUDA module need to know of a replica's backend: its device and stream.
#pragma once
#include <cuda_runtime.h>

#include <memory>

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

}  // namespace kx::backend::cuda
