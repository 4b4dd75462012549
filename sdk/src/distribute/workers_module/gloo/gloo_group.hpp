// A group of worker processes: the engine behind the module's C table. Started by TF_CONFIG, workers
// join through the chief's rendezvous store; when they find themselves on one host, sums travel
// through shared memory (HostMemory), else over Gloo's TCP transport. Started by mpirun, Open MPI
// carries them (MpiEngine: shared memory on one host). Every launcher sums in rank order
// (rank_order_sum.hpp), so N workers hold the bits of N replicas in one process. Every wait has a
// timeout, and every call first checks that all workers make the same call.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include "distribute/workers_module/gloo/call_agreement.hpp"
#include "distribute/workers_module/host_sums/host_memory.hpp"
#include "distribute/workers_module/mpi/mpi_engine.hpp"
#include "distribute/workers_module/rendezvous/rendezvous_service.hpp"

namespace kx::workers {

struct JoinSpec {
  bool mpi = false;                    // launched by mpirun: MPI carries the tensors
  int rank = 0;
  int size = 2;
  std::vector<std::string> addresses;  // TF_CONFIG's workers in rank order ("host:port")
  std::chrono::milliseconds timeout{60000};
};

class GlooGroup {
 public:
  // Returns once every worker has joined; Comm when they do not within spec.timeout, InvalidArgument
  // when the workers disagree on the cluster or two claim one rank.
  explicit GlooGroup(const JoinSpec& spec);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  const std::string& address(int rank) const { return addresses_.at(static_cast<size_t>(rank)); }
  void set_timeout(std::chrono::milliseconds timeout);

  void all_reduce_sum(void* data, size_t count, int dtype);
  void broadcast(void* data, size_t bytes, int root);
  void barrier();
  void all_gather(const void* data, size_t bytes, const std::function<void(int, const char*, size_t)>& sink);

 private:
  void rendezvous(const std::string& host);
  // Whether every worker is on this host and maps worker 0's shared memory: then host_ carries the
  // sums and the call headers. Any failure leaves host_ empty (TCP), on every worker alike.
  void share_host_memory();
  // The rank-order sum over Gloo's TCP connections.
  template <typename T>
  void sum_over_tcp(T* data, size_t count);
  // Every worker's header for this call, checked to match (InvalidArgument otherwise).
  std::vector<CallHeader> agree(CallHeader mine);
  // Runs one collective: the group's first failure is kept and reported by every later call.
  void collective(const char* name, const std::function<void()>& body);
  std::string describe_worker(int rank) const;
  uint32_t tag(int part) const { return static_cast<uint32_t>(calls_ * 4 + static_cast<uint64_t>(part)); }
  MpiEngine::Clock::time_point deadline() const { return MpiEngine::Clock::now() + timeout_; }

  int rank_;
  int size_;
  std::vector<std::string> addresses_;  // every worker's rendezvous service, "host:port"
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds join_timeout_;
  uint64_t calls_ = 0;
  std::optional<std::string> failure_;  // set by the first failed operation; the group is then unusable
  std::mutex mutex_;
  // Declared in the order they must be torn down last-to-first: Gloo's connections, then its device
  // (and its event loop thread), then the rendezvous service.
  std::unique_ptr<MpiEngine> mpi_;  // under mpirun; Gloo's device and context stay unset then
  std::unique_ptr<RendezvousService> service_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::optional<HostMemory> host_;
  std::string shared_memory_refused_;  // this worker's KX_SHARED_MEMORY is not a setting: the first sum says so
  std::vector<char> received_;         // the other workers' copies of this worker's part of a sum
};

}  // namespace kx::workers
