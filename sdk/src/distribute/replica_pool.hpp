// Runs one task per replica concurrently: replica 0 on the calling thread, the others on threads that
// live as long as the pool. A failing replica never leaves another one waiting: every task runs to its
// end, and the caller gets the error of the lowest failing replica once all have finished.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <type_traits>
#include <vector>

namespace kx::distribute {

class ReplicaPool {
 public:
  explicit ReplicaPool(int replicas);
  ~ReplicaPool();
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;

  int size() const { return static_cast<int>(errors_.size()); }

  // task(k) for every replica k; returns when all have returned. Not reentrant: one run at a time.
  // Takes the callable by reference, not as a std::function: a step runs this twice and must not allocate.
  template <class Task>
  void run(Task&& task) {
    using T = std::remove_reference_t<Task>;
    run_erased(const_cast<void*>(static_cast<const void*>(&task)),
               [](void* t, int replica) { (*static_cast<T*>(t))(replica); });
  }

 private:
  using Call = void (*)(void* task, int replica);
  void run_erased(void* task, Call call);
  void serve(int replica);
  void run_one(int replica) noexcept;

  std::vector<std::exception_ptr> errors_;
  void* task_ = nullptr;
  Call call_ = nullptr;
  std::atomic<uint64_t> generation_{0};  // bumped once per run; workers wait for it to change
  std::atomic<int> pending_{0};          // workers still running this generation's task
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;     // last: started after everything they read exists
};

}  // namespace kx::distribute
