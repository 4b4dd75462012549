#include "distribute/workers_module/host_sums/host_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

namespace kx::workers {
namespace {

constexpr uint64_t kMagic = 0x6b782d686f73742dULL;  // "kx-host-"
constexpr size_t kLine = 64;                         // one cache line per worker's counter and record

[[noreturn]] void system_error(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

uint64_t random_nonce() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(getpid());
}

// The counters live in memory other processes write: atomic_ref gives them atomic, ordered access
// (uint64_t atomics are lock-free, so they work across processes).
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);

}  // namespace

size_t HostMemory::control_bytes(int size) {
  const size_t bytes = kLine * (1 + static_cast<size_t>(size)) + 2 * static_cast<size_t>(size) * kRecordBytes;
  const size_t page = 4096;
  return (bytes + page - 1) / page * page;
}

HostMemory::HostMemory(std::string name, uint64_t nonce, int rank, int size, int fd, bool owner)
    : name_(std::move(name)), nonce_(nonce), rank_(rank), size_(size), owner_(owner), linked_(owner) {
  bytes_ = total_bytes(size);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mapped_errno = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (owner_) shm_unlink(name_.c_str());
    errno = mapped_errno;
    system_error("mmap of " + name_);
  }
  base_ = static_cast<char*>(p);
}

HostMemory::HostMemory(HostMemory&& other) noexcept
    : name_(std::move(other.name_)), nonce_(other.nonce_), rank_(other.rank_), size_(other.size_),
      base_(std::exchange(other.base_, nullptr)), bytes_(other.bytes_), owner_(other.owner_),
      linked_(std::exchange(other.linked_, false)), barriers_(other.barriers_), exchanges_(other.exchanges_),
      slot_uses_(other.slot_uses_) {}

HostMemory::~HostMemory() {
  if (base_) munmap(base_, bytes_);
  if (linked_) shm_unlink(name_.c_str());
}

HostMemory HostMemory::create(int size) {
  const uint64_t nonce = random_nonce();
  const std::string name = "/kx-workers-" + std::to_string(getpid()) + "-" + std::to_string(nonce % 1000000007ULL);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) system_error("shm_open " + name);
  // Reserve every page now: a /dev/shm too small for them fails here, not with SIGBUS mid-sum.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(total_bytes(size)));
  if (reserved != 0) {
    close(fd);
    shm_unlink(name.c_str());
    errno = reserved;
    system_error("reserving " + std::to_string(total_bytes(size)) + " bytes of " + name);
  }
  HostMemory m(name, nonce, 0, size, fd, true);
  auto* head = reinterpret_cast<uint64_t*>(m.base_);
  head[1] = nonce;
  head[2] = static_cast<uint64_t>(size);
  std::atomic_ref<uint64_t>(head[0]).store(kMagic, std::memory_order_release);
  return m;
}

HostMemory HostMemory::open(const std::string& name, uint64_t nonce, int rank, int size) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) system_error("shm_open " + name);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != total_bytes(size)) {
    close(fd);
    throw std::runtime_error(name + " is not the size the workers' shared memory must have");
  }
  HostMemory m(name, nonce, rank, size, fd, false);
  const auto* head = reinterpret_cast<uint64_t*>(m.base_);
  if (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(head[0])).load(std::memory_order_acquire) != kMagic ||
      head[1] != nonce || head[2] != static_cast<uint64_t>(size))
    throw std::runtime_error(name + " is another process's shared memory (its nonce differs)");
  return m;
}

void HostMemory::unlink() {
  if (linked_ && shm_unlink(name_.c_str()) != 0 && errno != ENOENT) system_error("shm_unlink " + name_);
  linked_ = false;
}

uint64_t* HostMemory::arrived(int r) const {
  return reinterpret_cast<uint64_t*>(base_ + kLine * (1 + static_cast<size_t>(r)));
}

char* HostMemory::record(uint64_t call, int r) const {
  const size_t area = static_cast<size_t>(call % 2) * static_cast<size_t>(size_) * kRecordBytes;
  return base_ + kLine * (1 + static_cast<size_t>(size_)) + area + static_cast<size_t>(r) * kRecordBytes;
}

void HostMemory::barrier(Clock::time_point deadline) {
  const uint64_t epoch = ++barriers_;
  std::atomic_ref<uint64_t>(*arrived(rank_)).store(epoch, std::memory_order_release);
  for (int r = 0; r < size_; ++r) {
    std::atomic_ref<uint64_t> theirs(*arrived(r));
    // Spin briefly (the others are usually close), then yield the core: the workers' own threads may
    // need it to get here.
    for (unsigned spins = 0; theirs.load(std::memory_order_acquire) < epoch; ++spins) {
      if (spins < 256) continue;
      std::this_thread::yield();
      if (spins % 1024 == 0 && Clock::now() >= deadline)
        throw std::runtime_error("worker " + std::to_string(r) + " did not reach the shared-memory sum in time");
    }
  }
}

void HostMemory::exchange(const void* mine, void* all, Clock::time_point deadline) {
  // Two areas alternate: a worker that writes call k + 2's record has passed call k + 1's barrier, so
  // every worker has read call k's records by then.
  const uint64_t call = exchanges_++;
  std::memcpy(record(call, rank_), mine, kRecordBytes);
  barrier(deadline);
  for (int r = 0; r < size_; ++r)
    std::memcpy(static_cast<char*>(all) + static_cast<size_t>(r) * kRecordBytes, record(call, r), kRecordBytes);
}

}  // namespace kx::workers
