// The processes of a multi-worker job, joined into one group that sums tensors across them: the
// cross-process layer under MultiWorkerMirroredStrategy (and the bootstrap of NCCL across processes).
// The engine (Gloo over TCP, bootstrapped by TF_CONFIG or mpirun) lives in the run-time module
// libkx_workers.so; a group of one worker needs no module.
//
// Every operation is collective: every worker calls the same operations in the same order, with the
// same sizes. Each has a timeout (default 60 s): a worker that died, hung or was stopped gives
// Status::Comm on every survivor within about the timeout, naming that worker, and the group stays
// failed (every later call gives the same error). Operations called differently across workers
// (sizes, kinds, roots) give Status::InvalidArgument on every worker and leave the group usable.
// One thread at a time per group.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster_spec.hpp"
#include "distribute/workers_module_api.h"

namespace kx::distribute {

class WorkerGroup {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{60000};

  // Joins the group `spec` describes (every worker calls it); returns when every worker has joined.
  // InvalidArgument for a task that is no worker (ps, evaluator), Unsupported without the engine
  // module (the message says why), Comm when the others do not all arrive within `timeout`.
  static std::unique_ptr<WorkerGroup> join(const ClusterSpec& spec, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_chief() const { return rank_ == 0; }
  // "worker 1 (127.0.0.1:2222)"
  std::string describe_worker(int rank) const;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout);

  // data := the sum over workers, bitwise the same on every worker and, for one cluster shape, from
  // run to run (the reduction order is fixed by the ranks).
  void all_reduce_sum(float* data, size_t count);
  void all_reduce_sum(double* data, size_t count);
  // data := root's data.
  void broadcast(void* data, size_t bytes, int root);
  // Returns when every worker has reached it.
  void barrier();
  // Every worker's blob, in rank order.
  std::vector<std::string> all_gather(const std::string& blob);

  // Only join() can make the key, so only join() builds groups (through make_unique).
  class JoinKey {
    friend class WorkerGroup;
    JoinKey() = default;
  };
  WorkerGroup(JoinKey, const kx_workers_api* api, kx_workers_group* handle, int rank, int size,
              std::chrono::milliseconds timeout, std::vector<std::string> addresses);

 private:
  void all_reduce(void* data, size_t count, int32_t dtype);

  const kx_workers_api* api_;  // null for a group of one
  kx_workers_group* handle_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> addresses_;  // TF_CONFIG's, for a group of one or before the module knows
};

}  // namespace kx::distribute
