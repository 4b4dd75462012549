// Collectives between the replicas of one strategy. Every replica calls the same collective with its
// own buffer, concurrently (as NCCL ranks do); the call returns when the result is in every buffer.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"

namespace kx::distribute {

class Collective {
 public:
  virtual ~Collective() = default;
  // buffer := sum over replicas of buffer, summed in replica order 0, 1, ... so that a run is bitwise
  // repeatable. Called by every replica, from its own thread, with its backend (whose memory buffer
  // is) and n equal everywhere.
  virtual void all_reduce_sum(int replica, backend::Backend& be, float* buffer, int64_t n) = 0;
};

// Replicas that are threads of this process and share one memory: CPU replicas, or logical replicas
// of one GPU. Each sums its share of the buffer with its own backend.
std::unique_ptr<Collective> make_in_process_collective(int replicas);

}  // namespace kx::distribute
