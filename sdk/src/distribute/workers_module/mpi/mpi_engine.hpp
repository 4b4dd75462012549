// The engine of a group launched by mpirun: Open MPI carries the tensors and first swaps the workers'
// rendezvous addresses, as llm.c swaps NCCL's id. When every worker is on one host, sums go through an
// MPI-3 shared-memory window (plain loads and stores: a 1 MiB sum of 2 workers takes about 0.14 ms on
// this 2-core VM, against 0.17 through Open MPI's point-to-point path and 0.7 for Gloo's TCP
// loopback); across hosts, through non-blocking point-to-point messages. libmpi.so.40 is opened at
// run time, so neither libkx nor this module links MPI.
//
// Every call has a deadline: MPI has no timeout of its own, so each one is a non-blocking MPI call
// polled until it completes or the deadline passes. After a missed deadline the engine is unusable
// (an MPI collective cannot be cancelled) and MPI is not finalised at exit, so the process can still
// end: mpirun then stops the job.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kx::workers {

class MpiEngine {
 public:
  using Clock = std::chrono::steady_clock;

  // "Open MPI's libmpi.so.40, opened at run time", or why this build has no mpirun launches.
  static const char* description();

  // Opens libmpi.so.40 and initialises MPI unless the program did (then it is finalised at exit, as
  // MPI can be initialised once per process), on a communicator of its own. Checks that MPI's rank
  // and size are `rank` and `size`. Unsupported without MPI, Comm when MPI fails.
  MpiEngine(int rank, int size);
  ~MpiEngine();
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  // Every worker's `record` (at most 255 bytes), in rank order.
  std::vector<std::string> all_gather_records(const std::string& record, Clock::time_point deadline);
  // out := every worker's `bytes` bytes of `in`, in rank order.
  void all_gather(const void* in, void* out, size_t bytes, Clock::time_point deadline);
  // data := the sum over workers (KX_WORKERS_FLOAT32 or _FLOAT64 elements).
  void all_reduce_sum(void* data, size_t count, int dtype, Clock::time_point deadline);
  void broadcast(void* data, size_t bytes, int root, Clock::time_point deadline);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kx::workers
