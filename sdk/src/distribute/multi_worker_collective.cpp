#include "distribute/multi_worker_collective.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda_module.hpp"
#include "config/env_switches.hpp"
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
    // A GPU's buffer goes through the host: several local replicas on one GPU, or a worker without
    // NCCL (one GPU per worker with NCCL everywhere takes nccl_across_workers instead).
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
    const NcclChoice nccl = nccl_choice();
    if (devices.size() == 1 && devices.front().kind == DeviceKind::Cuda && nccl != NcclChoice::Never &&
        (group_->size() > 1 || nccl == NcclChoice::Required))
      if (std::unique_ptr<Collective> across = nccl_across_workers(replicas.front(), nccl)) return across;
    if (group_->size() == 1) return local;  // one worker: the mirrored strategy's collective
    return std::make_unique<MultiWorkerCollective>(std::move(local), group_, static_cast<int>(replicas.size()));
  }

 private:
  // KX_NCCL_ACROSS_WORKERS: unset, NCCL between the workers' GPUs when every worker can use it; "0",
  // never (through host memory); "1", required, even by a job of one worker (how a machine with one
  // GPU tests the path: NCCL refuses two ranks on one GPU).
  enum class NcclChoice { Auto, Never, Required };
  static NcclChoice nccl_choice() {
    const std::optional<bool> setting = config::flag("KX_NCCL_ACROSS_WORKERS");
    if (!setting) return NcclChoice::Auto;
    return *setting ? NcclChoice::Required : NcclChoice::Never;
  }

  // One GPU per worker: NCCL between the workers' GPUs, bootstrapped as llm.c does (the chief's id
  // broadcast over the CPU engine); null when some worker cannot use NCCL and it is not required (the
  // gradients then cross through host memory). Every worker makes the same calls, so one without NCCL
  // sends all of them the host way, or gives all of them the error, rather than leaving them waiting.
  std::unique_ptr<Collective> nccl_across_workers(backend::Backend* replica, NcclChoice choice) const {
    const backend::CudaModule& cuda = backend::CudaModule::load();
    const std::string unavailable = cuda.nccl_unavailable();
    double usable = unavailable.empty() ? 1.0 : 0.0;
    group_->all_reduce_sum(&usable, 1);
    if (usable != static_cast<double>(group_->size())) {
      require(choice != NcclChoice::Required, Status::Unsupported,
              "KX_NCCL_ACROSS_WORKERS=1, but " +
                  (unavailable.empty() ? std::string("another worker cannot use NCCL")
                                       : "NCCL cannot be used on " + group_->describe_worker(group_->rank()) + ": " +
                                             unavailable));
      return nullptr;
    }
    // The chief's id, or its failure to make one (first byte 0, then the message).
    std::array<char, 1 + backend::module::kNcclIdBytes> message{};
    if (group_->is_chief()) {
      try {
        const std::array<char, backend::module::kNcclIdBytes> id = cuda.nccl_unique_id();
        message[0] = 1;
        std::copy(id.begin(), id.end(), message.begin() + 1);
      } catch (const Error& e) {
        std::snprintf(message.data() + 1, message.size() - 1, "%s", e.what());
      }
    }
    group_->broadcast(message.data(), message.size(), 0);
    message.back() = '\0';
    require(message[0] == 1, Status::Device, std::string("the chief could not start NCCL: ") + (message.data() + 1));
    std::array<char, backend::module::kNcclIdBytes> id{};
    std::copy(message.begin() + 1, message.end(), id.begin());
    return cuda.create_worker_collective(replica, id, group_->rank(), group_->size(), group_->timeout());
  }

  std::shared_ptr<WorkerGroup> group_;
};

}  // namespace

std::shared_ptr<const CollectiveFactory> multi_worker_collective_factory(std::shared_ptr<WorkerGroup> group) {
  return std::make_shared<MultiWorkerCollectiveFactory>(std::move(group));
}

}  // namespace kx::distribute
