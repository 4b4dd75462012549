// All-reduce between CPU replicas in one process: each replica sums its own share of the arena across
// every replica's buffer and writes the sum back to all of them, between two barriers.
#include <algorithm>
#include <barrier>
#include <vector>

#include "distribute/collective.hpp"

namespace kx::distribute {
namespace {

class InProcessCollective final : public Collective {
 public:
  explicit InProcessCollective(int replicas) : buffers_(static_cast<size_t>(replicas)), barrier_(replicas) {}

  void all_reduce_sum(int replica, float* buffer, int64_t n) override {
    const int count = static_cast<int>(buffers_.size());
    buffers_[static_cast<size_t>(replica)] = buffer;
    barrier_.arrive_and_wait();  // every buffer is known and its gradients are final
    // Shares in whole cache lines, so that no two replicas write the same line.
    const int64_t share = ((n + count - 1) / count + 15) / 16 * 16;
    const int64_t begin = std::min(n, replica * share), end = std::min(n, begin + share);
    float* sum = buffers_[0] + begin;
    for (int r = 1; r < count; ++r) {
      const float* part = buffers_[static_cast<size_t>(r)] + begin;
      for (int64_t i = 0; i < end - begin; ++i) sum[i] += part[i];
    }
    for (int r = 1; r < count; ++r) std::copy(sum, sum + (end - begin), buffers_[static_cast<size_t>(r)] + begin);
    barrier_.arrive_and_wait();  // every share is summed before anyone reads its buffer again
  }

 private:
  std::vector<float*> buffers_;
  std::barrier<> barrier_;
};

}  // namespace

std::unique_ptr<Collective> make_in_process_collective(int replicas) {
  return std::make_unique<InProcessCollective>(replicas);
}

}  // namespace kx::distribute
