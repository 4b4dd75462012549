// All-reduce between replicas of one process that share a memory (CPU replicas, or logical replicas of
// one GPU): each replica sums its own share of the arena across every replica's buffer and writes the
// sum back to all of them, between two barriers.
#include <algorithm>
#include <barrier>
#include <vector>

#include "distribute/collective.hpp"

namespace kx::distribute {
namespace {

class InProcessCollective final : public Collective {
 public:
  explicit InProcessCollective(int replicas) : buffers_(static_cast<size_t>(replicas)), barrier_(replicas) {}

  void all_reduce_sum(int replica, backend::Backend& be, float* buffer, int64_t n) override {
    const int count = static_cast<int>(buffers_.size());
    buffers_[static_cast<size_t>(replica)] = buffer;
    be.synchronize();
    barrier_.arrive_and_wait();  // every buffer is known and its gradients are final
    // Shares in whole cache lines, so that no two replicas write the same line.
    const int64_t share = ((n + count - 1) / count + 15) / 16 * 16;
    const int64_t begin = std::min(n, replica * share), end = std::min(n, begin + share);
    if (end > begin) be.sum_across(begin, end - begin, buffers_.data(), count);
    be.synchronize();
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
