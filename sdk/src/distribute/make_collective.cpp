// Which collective keeps a strategy's replicas in sync: in process when they share one memory (CPU
// replicas, logical replicas of one GPU), NCCL when each has a GPU of its own.
#include <string>
#include <vector>

#include "backend/cuda_module.hpp"
#include "distribute/collective.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

bool all_same(const std::vector<Device>& devices) {
  for (const Device& d : devices)
    if (!(d == devices.front())) return false;
  return true;
}

bool distinct_gpus(const std::vector<Device>& devices) {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].kind != DeviceKind::Cuda) return false;
    for (size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i]) return false;
  }
  return true;
}

}  // namespace

void require_supported_replicas(const std::vector<Device>& devices) {
  if (devices.empty() || all_same(devices) || distinct_gpus(devices)) return;
  std::string names;
  for (const Device& d : devices) names += (names.empty() ? "" : ", ") + d.name();
  fail(Status::Unsupported, "replicas must all be on one device (logical replicas) or each on a GPU of its own; " +
                                names + " mixes the two");
}

std::unique_ptr<Collective> make_collective(const std::vector<Device>& devices,
                                            const std::vector<backend::Backend*>& replicas) {
  if (replicas.size() < 2) return nullptr;
  if (all_same(devices)) return make_in_process_collective(static_cast<int>(replicas.size()));
  return backend::CudaModule::load().create_collective(replicas);
}

}  // namespace kx::distribute
