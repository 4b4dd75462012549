// Memory that every worker of one host maps (POSIX shared memory), so that TF_CONFIG workers that find
// themselves on one machine sum through it with loads and stores, as mpirun's workers do through
// MPI's shared window, instead of through Gloo's TCP connections (whose event thread starves when the
// workers' threads keep every core busy). Across hosts the sums stay on TCP.
//
// Worker 0 creates the object, the others open it by name and check its nonce, and once all have
// mapped it worker 0 unlinks the name: nothing is left in /dev/shm, even after a crash later on.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "distribute/workers_module/host_sums/rank_order_sum.hpp"

namespace kx::workers {

class HostMemory {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kSlotBytes = size_t{2} << 20;  // per worker and slot; two slots alternate
  static constexpr size_t kRecordBytes = 64;             // a record each worker shares per call

  // Worker 0's new object: a fresh name and nonce. Throws (the caller falls back to TCP) where /dev/shm
  // cannot hold it: the pages are reserved up front, so a full /dev/shm is an error here and never a
  // SIGBUS in a later sum.
  static HostMemory create(int size);
  // Another worker's view of worker 0's object; throws unless it exists with this size and nonce.
  static HostMemory open(const std::string& name, uint64_t nonce, int rank, int size);

  HostMemory(HostMemory&& other) noexcept;
  HostMemory& operator=(HostMemory&&) = delete;
  HostMemory(const HostMemory&) = delete;
  ~HostMemory();

  const std::string& name() const { return name_; }
  uint64_t nonce() const { return nonce_; }
  // Removes the name (worker 0, once every worker has mapped the object).
  void unlink();

  // Returns when every worker has called it as often as this one; what each wrote to the object before
  // is visible to all after. Throws std::runtime_error past the deadline (a worker gone or stopped).
  void barrier(Clock::time_point deadline);
  // Every worker's record of this call (kRecordBytes each, rank order) into `all`.
  void exchange(const void* mine, void* all, Clock::time_point deadline);
  // The rank-order sum of `count` elements of T (float or double) across the workers.
  template <typename T>
  void all_reduce_sum(T* data, size_t count, Clock::time_point deadline) {
    sum_in_segments(
        static_cast<size_t>(size_), static_cast<size_t>(rank_), data, count, kSlotBytes, slot_uses_,
        [this](size_t r) { return slots(r); }, [&] { barrier(deadline); });
  }

 private:
  HostMemory(std::string name, uint64_t nonce, int rank, int size, int fd, bool owner);
  static size_t control_bytes(int size);
  static size_t total_bytes(int size) { return control_bytes(size) + static_cast<size_t>(size) * 2 * kSlotBytes; }
  uint64_t* arrived(int r) const;
  char* record(uint64_t call, int r) const;
  char* slots(size_t r) const { return base_ + control_bytes(size_) + r * 2 * kSlotBytes; }

  std::string name_;
  uint64_t nonce_ = 0;
  int rank_ = 0;
  int size_ = 0;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;  // created the name, and unlinks it if still there
  bool linked_ = false;
  uint64_t barriers_ = 0;          // barriers passed: every worker counts the same calls
  uint64_t exchanges_ = 0;         // records alternate between two areas, see exchange
  unsigned long long slot_uses_ = 0;
};

}  // namespace kx::workers
