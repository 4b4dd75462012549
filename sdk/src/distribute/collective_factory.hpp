// Who makes the collective that keeps a model's replicas in sync: the strategy. The model asks the
// strategy's factory once, at compile, and its step runner only ever calls the Collective it gets; how
// that collective is made (in process, NCCL, across processes) is decided here and nowhere else.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "distribute/collective.hpp"
#include "kx/device.hpp"
#include "kx/strategy.hpp"

namespace kx::distribute {

// Makes the collective of one model's replicas. A strategy may carry one
// (Strategy::set_collective_factory); without one, local_collective_factory() decides.
//
// How a cross-process (MPI or Gloo) strategy plugs in: its factory makes the local collective with
// make_collective (null for one local replica) and returns a Collective wrapping it, whose
// all_reduce_sum runs, in a fixed order so that runs repeat bitwise: the local sum (the wrapped
// collective; every local buffer then holds it), the sum across workers of local replica 0's buffer,
// and a local broadcast of that result to the other local replicas. It returns a collective even for
// one local replica, and capturable() false when the cross-worker part waits on the host. Nothing in
// the step runner or the model changes.
class CollectiveFactory {
 public:
  virtual ~CollectiveFactory() = default;
  // The collective for replicas on `devices` (already accepted by require_supported_replicas),
  // replicas[k] being the backend of devices[k]; null when there is nothing to sum (one replica in all).
  virtual std::unique_ptr<Collective> make(const std::vector<Device>& devices,
                                           const std::vector<backend::Backend*>& replicas) const = 0;
};

// The choice for replicas of one process: make_collective (in process when they share one device,
// NCCL when each has a GPU of its own).
std::shared_ptr<const CollectiveFactory> local_collective_factory();

// The factory strategy s carries, else the local one.
const CollectiveFactory& collective_factory_of(const Strategy& s);

}  // namespace kx::distribute
