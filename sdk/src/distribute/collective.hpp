// Collectives between the replicas of one strategy. Every replica calls the same collective with its
// own buffer, concurrently (as NCCL ranks do); the call returns when the result is in every buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "kx/device.hpp"

namespace kx::distribute {

class Collective {
 public:
  virtual ~Collective() = default;
  // buffer := sum over replicas of buffer, summed in replica order 0, 1, ... so that a run is bitwise
  // repeatable. Called by every replica, from its own thread, with its backend (whose memory buffer
  // is) and n equal everywhere.
  virtual void all_reduce_sum(int replica, backend::Backend& be, float* buffer, int64_t n) = 0;
  // True when all_reduce_sum only queues work on the replica's backend, so that a recorded step
  // (Backend::capture) can hold it; false when it waits on the host.
  virtual bool capturable() const { return false; }
};

// Replicas that are threads of this process and share one memory: CPU replicas, or logical replicas
// of one GPU. Each sums its share of the buffer with its own backend.
std::unique_ptr<Collective> make_in_process_collective(int replicas);

// Status::Unsupported unless the devices are all one device or each a distinct GPU.
void require_supported_replicas(const std::vector<Device>& devices);
// The collective for replicas on `devices` (already accepted by require_supported_replicas) with these
// backends, null for one replica: in process when all share one device, NCCL (through the CUDA
// module) when each has a GPU of its own.
std::unique_ptr<Collective> make_collective(const std::vector<Device>& devices,
                                            const std::vector<backend::Backend*>& replicas);

}  // namespace kx::distribute
