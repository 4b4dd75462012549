// All-reduce between the worker processes of a multi-worker job, one GPU each, through NCCL. The
// bootstrap is llm.c's: the chief's ncclUniqueId reaches every worker over the CPU engine (libkx does
// that), then each joins with ncclCommInitRankConfig.
//
// The communicator is non-blocking (config.blocking = 0), so that nothing waits past the group's
// timeout: the join and every sum are polled (ncclCommGetAsyncError, cudaStreamQuery) until they are
// done or the deadline passes, and a communicator that misses it is aborted (ncclCommAbort). A worker
// that died or was stopped is then Status::Comm on the others, as with the CPU engine. Since the sum
// is awaited on the host, a step that uses it is not recorded into a CUDA graph.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "distribute/collective.hpp"
#include "kx/error.hpp"

#ifdef KX_HAVE_NCCL
#include "backend/cuda/nccl_library.hpp"
#endif

namespace kx::backend::cuda {
namespace {
// What NCCL is asked for here, in messages.
constexpr const char kPurpose[] = "GPUs of several worker processes";
}  // namespace

#ifdef KX_HAVE_NCCL
namespace {

using Clock = std::chrono::steady_clock;

class NcclWorkerCollective final : public distribute::Collective {
 public:
  NcclWorkerCollective(Backend& replica, const char* id, int rank, int size, int64_t timeout_ms)
      : nccl_(NcclLibrary::load(kPurpose)),
        stream_(replica_stream(replica)),
        rank_(rank),
        timeout_(std::chrono::milliseconds(timeout_ms)) {
    check(cudaSetDevice(stream_.device), "cudaSetDevice");
    ncclUniqueId unique{};
    std::memcpy(unique.internal, id, sizeof unique.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    try {
      started(nccl_.comm_init_rank_config(&comm_, size, unique, rank, &config), "ncclCommInitRankConfig");
      wait_for_communicator("joining the other workers' GPUs (ncclCommInitRankConfig)", Clock::now() + timeout_);
    } catch (...) {
      // A constructor that throws runs no destructor: the half-joined communicator is aborted here.
      if (comm_) nccl_.comm_abort(comm_);
      throw;
    }
  }

  ~NcclWorkerCollective() override {
    if (!comm_) return;
    cudaSetDevice(stream_.device);
    // After a failure the others may be gone: abort is local, destroy would wait for them.
    if (failed_) nccl_.comm_abort(comm_);
    else nccl_.comm_destroy(comm_);
  }

  void all_reduce_sum(int, Backend&, float* buffer, int64_t n) override {
    require(!failed_, Status::Comm, "the GPUs' communicator between workers failed earlier: " + failure_);
    check(cudaSetDevice(stream_.device), "cudaSetDevice");
    const Clock::time_point deadline = Clock::now() + timeout_;
    started(nccl_.all_reduce(buffer, buffer, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream_.stream),
            "ncclAllReduce of the gradients");
    wait_for_communicator("enqueueing the sum of the gradients (ncclAllReduce)", deadline);
    for (;;) {
      const cudaError_t done = cudaStreamQuery(stream_.stream);
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) check(done, "the sum of the gradients across workers (ncclAllReduce)");
      poll_communicator("the sum of the gradients across workers (ncclAllReduce)", deadline);
      std::this_thread::yield();
    }
  }

  // The sum is awaited on the host, with a deadline: not inside a recorded graph.
  bool capturable() const override { return false; }

 private:
  // A non-blocking call returns ncclInProgress while it works; anything else but success failed.
  void started(ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    give_up(Status::Device, std::string(what) + " on worker " + std::to_string(rank_) + ": " + nccl_.error_string(r));
  }
  // Waits until the communicator's pending work (its join, an enqueue) is done.
  void wait_for_communicator(const std::string& what, Clock::time_point deadline) {
    while (!poll_communicator(what, deadline)) std::this_thread::yield();
  }
  // True when the communicator is ready; throws on its error or past the deadline.
  bool poll_communicator(const std::string& what, Clock::time_point deadline) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = nccl_.comm_get_async_error(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return true;
    if (state != ncclInProgress)
      give_up(Status::Comm, what + " failed on worker " + std::to_string(rank_) + ": " + nccl_.error_string(state));
    if (Clock::now() >= deadline)
      give_up(Status::Comm, what + " did not complete within " + std::to_string(timeout_.count()) + " ms on worker " +
                                std::to_string(rank_) + ": another worker is gone, stopped or slower than the timeout");
    return false;
  }
  [[noreturn]] void give_up(Status status, const std::string& message) {
    failed_ = true;
    failure_ = message;
    fail(status, message);
  }

  const NcclLibrary& nccl_;
  ReplicaStream stream_;
  int rank_;
  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  bool failed_ = false;
  std::string failure_;
};

}  // namespace

std::string nccl_unavailable_reason() { return NcclLibrary::get().why; }

void nccl_unique_id(char* id, size_t id_len) {
  const NcclLibrary& nccl = NcclLibrary::load(kPurpose);
  ncclUniqueId unique{};
  require(id_len == sizeof unique.internal, Status::Internal,
          "an NCCL id of " + std::to_string(id_len) + " bytes, NCCL's has " + std::to_string(sizeof unique.internal));
  const ncclResult_t r = nccl.get_unique_id(&unique);
  require(r == ncclSuccess, Status::Device, std::string("ncclGetUniqueId: ") + nccl.error_string(r));
  std::memcpy(id, unique.internal, sizeof unique.internal);
}

std::unique_ptr<distribute::Collective> create_nccl_worker_collective(Backend& replica, const char* id, int rank,
                                                                      int size, int64_t timeout_ms) {
  return std::make_unique<NcclWorkerCollective>(replica, id, rank, size, timeout_ms);
}

#else

std::string nccl_unavailable_reason() { return "this build of the CUDA module was made without nccl.h"; }

namespace {
[[noreturn]] void no_nccl() {
  fail(Status::Unsupported, std::string(kPurpose) + " need NCCL, and " + nccl_unavailable_reason());
}
}  // namespace

void nccl_unique_id(char*, size_t) { no_nccl(); }

std::unique_ptr<distribute::Collective> create_nccl_worker_collective(Backend&, const char*, int, int, int64_t) {
  no_nccl();
}

#endif

}  // namespace kx::backend::cuda
