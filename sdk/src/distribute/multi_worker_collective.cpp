#include "distribute/multi_worker_collective.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <vector>

#include "kx/error.hpp"

namespace kx::distribute {
namespace {

// Local replica 0 hands the cross-worker sum to the other local replicas. A failure on replica 0 (a
// dead worker) reaches every replica, so none waits for a result that will not come.
class LocalHandOff {
 public:
  explicit LocalHandOff(int replicas) : replicas_(replicas) {}

  // Replica 0: the result is in its buffer (or the sum failed with `error`).
  void publish(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    ++generation_;
    waiting_ = replicas_ - 1;
    cv_.notify_all();
  }
  // Replicas 1..: waits for this step's publish; rethrows its error (after counting the replica as done).
  // `seen` is the caller's last generation.
  void await(uint64_t& seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return generation_ != seen; });
    seen = generation_;
    if (std::exception_ptr error = error_) {
      if (--waiting_ == 0) cv_.notify_all();
      std::rethrow_exception(error);
    }
  }
  // Replicas 1..: the result is copied; replica 0's buffer may be written again.
  void taken() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--waiting_ == 0) cv_.notify_all();
  }
  // Replica 0, before its buffer is written again: every other replica has taken the last result.
  void wait_until_taken() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return waiting_ == 0; });
  }

 private:
  const int replicas_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int waiting_ = 0;
  std::exception_ptr error_;
};

class MultiWorkerCollective final : public Collective {
 public:
  MultiWorkerCollective(std::unique_ptr<Collective> local, std::shared_ptr<WorkerGroup> group, int replicas)
      : local_(std::move(local)),
        group_(std::move(group)),
        hand_off_(replicas),
        seen_(static_cast<size_t>(replicas), 0) {}

  void all_reduce_sum(int replica, backend::Backend& be, float* buffer, int64_t n) override {
    if (local_) local_->all_reduce_sum(replica, be, buffer, n);  // every local buffer: the local sum
    if (replica != 0) {
      hand_off_.await(seen_[static_cast<size_t>(replica)]);
      // Local replicas share one device (require_local_replicas): a device copy takes the result.
      be.copy(n, replica0_buffer_, buffer);
      be.synchronize();
      hand_off_.taken();
      return;
    }
    std::exception_ptr error;
    try {
      sum_across_workers(be, buffer, n);
    } catch (...) {
      error = std::current_exception();
    }
    replica0_buffer_ = buffer;
    hand_off_.publish(error);
    hand_off_.wait_until_taken();  // the buffer is the optimizer's again only once every replica copied it
    if (error) std::rethrow_exception(error);
  }

 private:
  void sum_across_workers(backend::Backend& be, float* buffer, int64_t n) {
    const auto count = static_cast<size_t>(n);
    if (be.host_accessible()) {
      group_->all_reduce_sum(buffer, count);
      return;
    }
    // A GPU's buffer goes through the host (NCCL across processes is not wired in yet).
    host_.resize(count);
    be.to_host(buffer, count * sizeof(float), host_.data());
    group_->all_reduce_sum(host_.data(), count);
    be.to_device(host_.data(), count * sizeof(float), buffer);
    be.synchronize();
  }

  std::unique_ptr<Collective> local_;
  std::shared_ptr<WorkerGroup> group_;
  LocalHandOff hand_off_;
  std::vector<uint64_t> seen_;
  float* replica0_buffer_ = nullptr;
  std::vector<float> host_;
};

class MultiWorkerCollectiveFactory final : public CollectiveFactory {
 public:
  explicit MultiWorkerCollectiveFactory(std::shared_ptr<WorkerGroup> group) : group_(std::move(group)) {}

  std::unique_ptr<Collective> make(const std::vector<Device>& devices,
                                   const std::vector<backend::Backend*>& replicas) const override {
    for (const Device& d : devices)
      require(d == devices.front(), Status::Unsupported,
              "a multi-worker strategy's local replicas must share one device (\"cpu\", or logical replicas of "
              "one GPU); " + devices.front().name() + " and " + d.name() + " are two");
    std::unique_ptr<Collective> local = make_collective(devices, replicas);
    if (group_->size() == 1) return local;  // one worker: the mirrored strategy's collective
    return std::make_unique<MultiWorkerCollective>(std::move(local), group_, static_cast<int>(replicas.size()));
  }

 private:
  std::shared_ptr<WorkerGroup> group_;
};

}  // namespace

std::shared_ptr<const CollectiveFactory> multi_worker_collective_factory(std::shared_ptr<WorkerGroup> group) {
  return std::make_shared<MultiWorkerCollectiveFactory>(std::move(group));
}

}  // namespace kx::distribute
