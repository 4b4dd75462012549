#include "distribute/replica_pool.hpp"

namespace kx::distribute {

namespace {

// Steps are often shorter than a futex wake-up, so a waiter spins a little before it sleeps.
constexpr int kSpins = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <class T, class Done>
void wait_until(const std::atomic<T>& a, Done done) {
  for (int i = 0; i < kSpins; ++i) {
    if (done(a.load(std::memory_order_acquire))) return;
    cpu_relax();
  }
  for (T v = a.load(std::memory_order_acquire); !done(v); v = a.load(std::memory_order_acquire)) a.wait(v);
}

}  // namespace

ReplicaPool::ReplicaPool(int replicas) : errors_(static_cast<size_t>(replicas > 0 ? replicas : 1)) {
  for (int k = 1; k < size(); ++k) threads_.emplace_back([this, k] { serve(k); });
}

ReplicaPool::~ReplicaPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaPool::run_one(int replica) noexcept {
  try {
    call_(task_, replica);
  } catch (...) {
    errors_[static_cast<size_t>(replica)] = std::current_exception();
  }
}

void ReplicaPool::serve(int replica) {
  uint64_t seen = 0;
  for (;;) {
    wait_until(generation_, [seen](uint64_t g) { return g != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    run_one(replica);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ReplicaPool::run_erased(void* task, Call call) {
  for (auto& e : errors_) e = nullptr;
  task_ = task;
  call_ = call;
  pending_.store(size() - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_one(0);
  wait_until(pending_, [](int p) { return p == 0; });
  task_ = nullptr;
  for (const auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

}  // namespace kx::distribute
