// MultiWorkerMirroredStrategy's all-reduce: the replicas of this process sum in process (as the mirrored
// strategy does), local replica 0 sums that across the workers, and the others take its result. The
// order is fixed (local replicas in order, then workers by rank), so a run repeats bitwise for one
// cluster shape.
#pragma once
#include <memory>

#include "distribute/collective_factory.hpp"
#include "distribute/worker_group.hpp"

namespace kx::distribute {

// The strategy's factory: the local collective (make_collective) wrapped in the cross-worker sum.
std::shared_ptr<const CollectiveFactory> multi_worker_collective_factory(std::shared_ptr<WorkerGroup> group);

}  // namespace kx::distribute
