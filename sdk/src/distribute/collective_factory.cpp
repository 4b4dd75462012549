#include "distribute/collective_factory.hpp"

namespace kx::distribute {
namespace {

class LocalCollectiveFactory final : public CollectiveFactory {
 public:
  std::unique_ptr<Collective> make(const std::vector<Device>& devices,
                                   const std::vector<backend::Backend*>& replicas) const override {
    return make_collective(devices, replicas);
  }
};

}  // namespace

std::shared_ptr<const CollectiveFactory> local_collective_factory() {
  // Stateless and immutable: one shared instance serves every strategy.
  static const std::shared_ptr<const CollectiveFactory> local = std::make_shared<LocalCollectiveFactory>();
  return local;
}

const CollectiveFactory& collective_factory_of(const Strategy& s) {
  if (const auto& own = s.collective_factory()) return *own;
  return *local_collective_factory();
}

}  // namespace kx::distribute
