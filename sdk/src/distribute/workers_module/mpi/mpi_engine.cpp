#include "distribute/workers_module/mpi/mpi_engine.hpp"

#include <stdexcept>

#include "config/env_switches.hpp"
#include "distribute/workers_module/host_sums/rank_order_sum.hpp"
#include "distribute/workers_module_api.h"
#include "io/shared_library.hpp"
#include "kx/error.hpp"

#ifdef KX_WORKERS_HAVE_MPI
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#define OMPI_SKIP_MPICXX 1  // the C interface only
#include <mpi.h>
#endif

namespace kx::workers {

#ifndef KX_WORKERS_HAVE_MPI

struct MpiEngine::State {};

const char* MpiEngine::description() { return "no mpirun launches (built without Open MPI's mpi.h)"; }

MpiEngine::MpiEngine(int, int) {
  fail(Status::Unsupported,
       "this kx was built without MPI (KX_WITH_MPI, libopenmpi-dev): launch the workers with TF_CONFIG instead of mpirun");
}
MpiEngine::~MpiEngine() = default;
std::vector<std::string> MpiEngine::all_gather_records(const std::string&, Clock::time_point) { return {}; }
void MpiEngine::all_gather(const void*, void*, size_t, Clock::time_point) {}
void MpiEngine::all_reduce_sum(void*, size_t, int, Clock::time_point) {}
void MpiEngine::broadcast(void*, size_t, int, Clock::time_point) {}

#else

namespace {

constexpr const char kLibrary[] = "libmpi.so.40";
constexpr size_t kRecordBytes = 256;
// MPI counts are ints: larger buffers go in pieces of this many elements.
constexpr size_t kPiece = size_t{1} << 30;

// The MPI functions used, resolved from the library, with their types taken from mpi.h.
struct MpiLibrary {
  decltype(&MPI_Initialized) initialized = nullptr;
  decltype(&MPI_Finalized) finalized = nullptr;
  decltype(&MPI_Init_thread) init_thread = nullptr;
  decltype(&MPI_Finalize) finalize = nullptr;
  decltype(&MPI_Comm_rank) comm_rank = nullptr;
  decltype(&MPI_Comm_size) comm_size = nullptr;
  decltype(&MPI_Comm_dup) comm_dup = nullptr;
  decltype(&MPI_Comm_free) comm_free = nullptr;
  decltype(&MPI_Iallgather) iallgather = nullptr;
  decltype(&MPI_Ibcast) ibcast = nullptr;
  decltype(&MPI_Test) test = nullptr;
  decltype(&MPI_Isend) isend = nullptr;
  decltype(&MPI_Irecv) irecv = nullptr;
  decltype(&MPI_Testall) testall = nullptr;
  decltype(&MPI_Ibarrier) ibarrier = nullptr;
  decltype(&MPI_Comm_split_type) comm_split_type = nullptr;
  decltype(&MPI_Win_allocate_shared) win_allocate_shared = nullptr;
  decltype(&MPI_Win_shared_query) win_shared_query = nullptr;
  decltype(&MPI_Win_lock_all) win_lock_all = nullptr;
  decltype(&MPI_Win_sync) win_sync = nullptr;
  // Open MPI's predefined handles are the addresses of its globals.
  MPI_Comm world = nullptr;
  MPI_Datatype bytes = nullptr;
  MPI_Datatype floats = nullptr;
  MPI_Datatype doubles = nullptr;
  MPI_Info info_null = nullptr;
};

template <typename T>
void resolve(io::SharedLibrary& handle, const char* name, T& out) {
  require(handle.resolve(name, out), Status::Unsupported,
          std::string(kLibrary) + " has no " + name + ": it is not Open MPI 4 or 5");
}

const MpiLibrary& library() {
  // Opened once and never unloaded (MPI lives as long as the process); RTLD_GLOBAL because Open MPI's
  // own plugins look for libmpi's symbols globally.
  static const MpiLibrary mpi = [] {
    io::SharedLibrary handle(kLibrary, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (!handle.opened())
      fail(Status::Unsupported, std::string("launched by mpirun, but ") + kLibrary + " could not be opened (" +
                                    handle.error() + "): install Open MPI (openmpi-bin) or launch with TF_CONFIG");
    MpiLibrary m;
    resolve(handle, "MPI_Initialized", m.initialized);
    resolve(handle, "MPI_Finalized", m.finalized);
    resolve(handle, "MPI_Init_thread", m.init_thread);
    resolve(handle, "MPI_Finalize", m.finalize);
    resolve(handle, "MPI_Comm_rank", m.comm_rank);
    resolve(handle, "MPI_Comm_size", m.comm_size);
    resolve(handle, "MPI_Comm_dup", m.comm_dup);
    resolve(handle, "MPI_Comm_free", m.comm_free);
    resolve(handle, "MPI_Iallgather", m.iallgather);
    resolve(handle, "MPI_Ibcast", m.ibcast);
    resolve(handle, "MPI_Test", m.test);
    resolve(handle, "MPI_Isend", m.isend);
    resolve(handle, "MPI_Irecv", m.irecv);
    resolve(handle, "MPI_Testall", m.testall);
    resolve(handle, "MPI_Ibarrier", m.ibarrier);
    resolve(handle, "MPI_Comm_split_type", m.comm_split_type);
    resolve(handle, "MPI_Win_allocate_shared", m.win_allocate_shared);
    resolve(handle, "MPI_Win_shared_query", m.win_shared_query);
    resolve(handle, "MPI_Win_lock_all", m.win_lock_all);
    resolve(handle, "MPI_Win_sync", m.win_sync);
    resolve(handle, "ompi_mpi_comm_world", m.world);
    resolve(handle, "ompi_mpi_byte", m.bytes);
    resolve(handle, "ompi_mpi_float", m.floats);
    resolve(handle, "ompi_mpi_double", m.doubles);
    resolve(handle, "ompi_mpi_info_null", m.info_null);
    return m;  // closing the library leaves it loaded (RTLD_NODELETE)
  }();
  return mpi;
}

// Set once a call missed its deadline: its request can never be cancelled, so MPI_Finalize at exit
// could wait for it forever. Process-wide because MPI itself is: one initialisation per process.
std::atomic<bool>& mpi_unusable() {
  static std::atomic<bool> flag{false};
  return flag;
}

void finalize_at_exit() {
  const MpiLibrary& mpi = library();
  int initialized = 0, finalized = 0;
  mpi.initialized(&initialized);
  mpi.finalized(&finalized);
  if (initialized && !finalized && !mpi_unusable().load()) mpi.finalize();
}

void check(int rc, const char* what) {
  require(rc == MPI_SUCCESS, Status::Comm, std::string(what) + " failed (MPI error " + std::to_string(rc) + ")");
}

// Shared memory that every worker on this host can read: two slots of kSlotBytes per worker, in one
// MPI-3 window (MPI_Win_allocate_shared). When all workers share a host, a sum goes through it with
// plain loads and stores, where Open MPI's point-to-point path copies through the kernel
// (process_vm_readv: about 2.2 GB/s on this VM). The window lives as long as MPI in the process: it is
// created by the first sum, after the call agreement has shown every worker is in that same call, and
// never freed before MPI_Finalize, because freeing is collective and a destructor must not wait for
// the other workers.
constexpr size_t kSlotBytes = size_t{2} << 20;

struct SharedSegments {
  MPI_Comm host = nullptr;          // the workers of this host, in world rank order
  bool whole_group = false;         // every worker is on this host: sums may use the segments
  MPI_Win window = nullptr;         // kept until MPI_Finalize
  std::vector<char*> segment;       // each worker's segment (2 slots), mapped in this process
  unsigned long long uses = 0;      // slots alternate, see sum_in_segments
  std::string refused;              // this worker's KX_MPI_SHARED_MEMORY is not a setting
};

// KX_MPI_SHARED_MEMORY=0: sums go point to point even when every worker is on this host, as they do
// across hosts (how one machine tests that path, and a way round a shared-memory problem). A value the
// switch does not take is `refused`, with the parser's message, and counts as 0: the other workers of
// the host are already in the collective below, so the error waits for the sum.
bool shared_memory_wanted(std::string& refused) {
  try {
    return config::flag("KX_MPI_SHARED_MEMORY").value_or(true);
  } catch (const Error& e) {
    refused = e.what();
    return false;
  }
}

SharedSegments& shared_segments(const MpiLibrary& mpi) {
  static SharedSegments segments = [&] {
    SharedSegments s;
    int world_rank = 0, world_size = 0, host_size = 0;
    check(mpi.comm_rank(mpi.world, &world_rank), "MPI_Comm_rank");
    check(mpi.comm_size(mpi.world, &world_size), "MPI_Comm_size");
    check(mpi.comm_split_type(mpi.world, MPI_COMM_TYPE_SHARED, world_rank, mpi.info_null, &s.host),
          "MPI_Comm_split_type");
    check(mpi.comm_size(s.host, &host_size), "MPI_Comm_size");
    // The window is made by every worker of the host or by none: each says whether it wants it. (The
    // call agreement has shown every worker is in this call, so the collectives here complete.)
    const char wanted = shared_memory_wanted(s.refused) ? 1 : 0;
    std::vector<char> all_wanted(static_cast<size_t>(host_size));
    MPI_Request request = nullptr;
    check(mpi.iallgather(&wanted, 1, mpi.bytes, all_wanted.data(), 1, mpi.bytes, s.host, &request), "MPI_Iallgather");
    for (int done = 0; !done;) check(mpi.testall(1, &request, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    s.whole_group = host_size == world_size && std::count(all_wanted.begin(), all_wanted.end(), 1) == host_size;
    if (!s.whole_group) return s;
    char* own = nullptr;
    check(mpi.win_allocate_shared(static_cast<MPI_Aint>(2 * kSlotBytes), 1, mpi.info_null, s.host, &own, &s.window),
          "MPI_Win_allocate_shared");
    check(mpi.win_lock_all(MPI_MODE_NOCHECK, s.window), "MPI_Win_lock_all");
    for (int r = 0; r < host_size; ++r) {
      MPI_Aint bytes = 0;
      int unit = 0;
      char* base = nullptr;
      check(mpi.win_shared_query(s.window, r, &bytes, &unit, &base), "MPI_Win_shared_query");
      s.segment.push_back(base);
    }
    return s;
  }();
  return segments;
}

}  // namespace

struct MpiEngine::State {
  const MpiLibrary& mpi = library();
  MPI_Comm comm = nullptr;
  int rank = 0;
  int size = 0;
  std::vector<char> received;  // the other workers' copies of this worker's part of a sum

  // Polls `requests` until they complete; past the deadline the engine is given up (see the header).
  void wait(std::vector<MPI_Request>& requests, Clock::time_point deadline, const char* what) {
    int done = 0;
    for (;;) {
      check(mpi.testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), what);
      if (done) return;
      if (Clock::now() >= deadline) {
        mpi_unusable() = true;
        // A std::exception, not a kx::Error: the group turns it into Comm after naming the absent workers.
        throw std::runtime_error(std::string(what) + " did not complete in time");
      }
    }
  }
  void wait(MPI_Request request, Clock::time_point deadline, const char* what) {
    std::vector<MPI_Request> one{request};
    wait(one, deadline, what);
  }

  // Every worker has reached this point, and what each wrote to the shared segments before it is
  // visible to all after it (MPI's unified model for shared windows: sync, barrier, sync).
  void host_barrier(SharedSegments& shared, Clock::time_point deadline) {
    check(mpi.win_sync(shared.window), "MPI_Win_sync");
    MPI_Request request = nullptr;
    check(mpi.ibarrier(shared.host, &request), "MPI_Ibarrier");
    wait(request, deadline, "the all-reduce's barrier (MPI_Ibarrier)");
    check(mpi.win_sync(shared.window), "MPI_Win_sync");
  }

  // The same sum as sum_piece, in the same order, through the shared segments (every worker on this
  // host): rank_order_sum.hpp.
  template <typename T>
  void sum_in_segments(SharedSegments& shared, T* data, size_t count, Clock::time_point deadline) {
    workers::sum_in_segments(
        static_cast<size_t>(size), static_cast<size_t>(rank), data, count, kSlotBytes, shared.uses,
        [&](size_t r) { return shared.segment[r]; }, [&] { host_barrier(shared, deadline); });
  }

  // The sum of `count` elements of T (at most kPiece): worker r owns part r of the buffer, receives
  // every other worker's copy of it and adds them in rank order, then sends the sum to every worker.
  // Each worker moves 2 (N-1)/N of the buffer, as a ring does, and every worker gets the owner's bytes.
  template <typename T>
  void sum_piece(T* data, size_t count, MPI_Datatype type, Clock::time_point deadline) {
    const auto n = static_cast<size_t>(size);
    const auto part_begin = [&](size_t r) { return rank_part_begin(count, r, n); };
    const size_t mine = part_begin(rank + 1) - part_begin(rank);
    received.resize(mine * (n - 1) * sizeof(T));
    T* copies = reinterpret_cast<T*>(received.data());
    std::vector<MPI_Request> requests;
    for (size_t r = 0, slot = 0; r < n; ++r) {
      if (static_cast<int>(r) == rank) continue;
      const size_t begin = part_begin(r), len = part_begin(r + 1) - begin;
      requests.emplace_back();
      check(mpi.isend(data + begin, static_cast<int>(len), type, static_cast<int>(r), 0, comm, &requests.back()), "MPI_Isend");
      requests.emplace_back();
      check(mpi.irecv(copies + slot * mine, static_cast<int>(mine), type, static_cast<int>(r), 0, comm, &requests.back()),
            "MPI_Irecv");
      ++slot;
    }
    wait(requests, deadline, "the all-reduce's exchange (MPI_Isend/MPI_Irecv)");
    T* own = data + part_begin(rank);
    std::vector<const T*> sources;
    for (size_t r = 0, slot = 0; r < n; ++r) sources.push_back(static_cast<int>(r) == rank ? own : copies + slot++ * mine);
    add_in_rank_order(sources, mine, own);
    requests.clear();
    for (size_t r = 0; r < n; ++r) {
      if (static_cast<int>(r) == rank) continue;
      const size_t begin = part_begin(r), len = part_begin(r + 1) - begin;
      requests.emplace_back();
      check(mpi.isend(own, static_cast<int>(mine), type, static_cast<int>(r), 1, comm, &requests.back()), "MPI_Isend");
      requests.emplace_back();
      check(mpi.irecv(data + begin, static_cast<int>(len), type, static_cast<int>(r), 1, comm, &requests.back()), "MPI_Irecv");
    }
    wait(requests, deadline, "the all-reduce's gather (MPI_Isend/MPI_Irecv)");
  }
};

const char* MpiEngine::description() { return "mpirun (Open MPI's libmpi.so.40, opened at run time)"; }

MpiEngine::MpiEngine(int rank, int size) : state_(std::make_unique<State>()) {
  const MpiLibrary& mpi = state_->mpi;
  require(!mpi_unusable().load(), Status::Comm, "MPI is unusable in this process: an earlier call never completed");
  int initialized = 0, finalized = 0;
  check(mpi.initialized(&initialized), "MPI_Initialized");
  check(mpi.finalized(&finalized), "MPI_Finalized");
  require(!finalized, Status::Misuse,
          "launched by mpirun, but MPI was already finalised in this process: MPI can be initialised once per process");
  if (!initialized) {
    // Calls come from one thread at a time, not always the same one (a replica's thread or the caller's).
    int provided = 0;
    check(mpi.init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    std::atexit(&finalize_at_exit);
  }
  int mpi_rank = -1, mpi_size = 0;
  check(mpi.comm_rank(mpi.world, &mpi_rank), "MPI_Comm_rank");
  check(mpi.comm_size(mpi.world, &mpi_size), "MPI_Comm_size");
  require(mpi_rank == rank && mpi_size == size, Status::InvalidArgument,
          "MPI says rank " + std::to_string(mpi_rank) + " of " + std::to_string(mpi_size) + ", the environment rank " +
              std::to_string(rank) + " of " + std::to_string(size));
  // A communicator of its own: the program's MPI traffic, if any, never meets kx's.
  check(mpi.comm_dup(mpi.world, &state_->comm), "MPI_Comm_dup");
  state_->rank = rank;
  state_->size = size;
}

MpiEngine::~MpiEngine() {
  if (state_ && state_->comm && !mpi_unusable().load()) state_->mpi.comm_free(&state_->comm);
}

std::vector<std::string> MpiEngine::all_gather_records(const std::string& record, Clock::time_point deadline) {
  require(record.size() < kRecordBytes, Status::Internal, "MPI bootstrap record too long: " + record);
  std::array<char, kRecordBytes> own{};
  record.copy(own.data(), record.size());
  int size = 0;
  check(state_->mpi.comm_size(state_->comm, &size), "MPI_Comm_size");
  std::vector<char> all(kRecordBytes * static_cast<size_t>(size));
  all_gather(own.data(), all.data(), kRecordBytes, deadline);
  std::vector<std::string> records;
  for (int i = 0; i < size; ++i) {
    const char* r = all.data() + kRecordBytes * static_cast<size_t>(i);
    records.emplace_back(r, strnlen(r, kRecordBytes));
  }
  return records;
}

void MpiEngine::all_gather(const void* in, void* out, size_t bytes, Clock::time_point deadline) {
  require(bytes <= INT_MAX, Status::InvalidArgument, "an all-gather of " + std::to_string(bytes) + " bytes per worker");
  MPI_Request request = nullptr;
  check(state_->mpi.iallgather(in, static_cast<int>(bytes), state_->mpi.bytes, out, static_cast<int>(bytes),
                               state_->mpi.bytes, state_->comm, &request),
        "MPI_Iallgather");
  state_->wait(request, deadline, "MPI_Iallgather");
}

void MpiEngine::all_reduce_sum(void* data, size_t count, int dtype, Clock::time_point deadline) {
  SharedSegments& shared = shared_segments(state_->mpi);
  require(shared.refused.empty(), Status::InvalidArgument, shared.refused);
  if (shared.whole_group) {
    if (dtype == KX_WORKERS_FLOAT32) state_->sum_in_segments(shared, static_cast<float*>(data), count, deadline);
    else state_->sum_in_segments(shared, static_cast<double*>(data), count, deadline);
    return;
  }
  // Workers on several hosts. Not MPI_Iallreduce: Open MPI's non-blocking one was 1.5-2x slower than
  // this on one host, and the order of its sums is the library's.
  for (size_t done = 0; done < count; done += kPiece) {
    const size_t n = std::min(kPiece, count - done);
    if (dtype == KX_WORKERS_FLOAT32) state_->sum_piece(static_cast<float*>(data) + done, n, state_->mpi.floats, deadline);
    else state_->sum_piece(static_cast<double*>(data) + done, n, state_->mpi.doubles, deadline);
  }
}

void MpiEngine::broadcast(void* data, size_t bytes, int root, Clock::time_point deadline) {
  for (size_t done = 0; done < bytes; done += kPiece) {
    const auto n = static_cast<int>(std::min(kPiece, bytes - done));
    MPI_Request request = nullptr;
    check(state_->mpi.ibcast(static_cast<char*>(data) + done, n, state_->mpi.bytes, root, state_->comm, &request),
          "MPI_Ibcast");
    state_->wait(request, deadline, "MPI_Ibcast");
  }
}

#endif

}  // namespace kx::workers
