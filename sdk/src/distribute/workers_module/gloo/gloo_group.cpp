#include "distribute/workers_module/gloo/gloo_group.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/broadcast.h>
#include <gloo/transport/tcp/device.h>

#include "config/env_switches.hpp"
#include "distribute/host_port.hpp"
#include "distribute/workers_module/rendezvous/local_address.hpp"
#include "distribute/workers_module/rendezvous/peer_probe.hpp"
#include "distribute/workers_module/host_sums/rank_order_sum.hpp"
#include "distribute/workers_module/rendezvous/tcp_store.hpp"
#include "distribute/workers_module_api.h"
#include "kx/error.hpp"

namespace kx::workers {
namespace {

constexpr std::chrono::milliseconds kPollPause{20};

// A peer that vanishes mid-write must be an error of the call, not the end of this process: Gloo
// writes with writev, which raises SIGPIPE. A program that installed its own handler keeps it.
void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

std::string own_host_name() {
  char name[256] = {};
  require(gethostname(name, sizeof name - 1) == 0, Status::Comm, std::string("gethostname: ") + std::strerror(errno));
  return name;
}

// Whether mpirun placed workers on other machines than this one.
bool workers_on_other_hosts(int size) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return !local || std::atoi(local) < size;
}

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : separator) + p;
  return s;
}

// Gloo's messages start with "[/path/file.cc:123] "; the reader wants what follows.
std::string without_location(const std::string& what) {
  if (!what.empty() && what.front() == '[') {
    const size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

std::string milliseconds_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

}  // namespace

GlooGroup::GlooGroup(const JoinSpec& spec)
    : rank_(spec.rank), size_(spec.size), addresses_(spec.addresses), timeout_(spec.timeout), join_timeout_(spec.timeout) {
  require(size_ >= 2 && rank_ >= 0 && rank_ < size_, Status::InvalidArgument,
          "worker " + std::to_string(rank_) + " of " + std::to_string(size_));
  require(spec.mpi || static_cast<int>(addresses_.size()) == size_, Status::InvalidArgument,
          std::to_string(addresses_.size()) + " addresses for " + std::to_string(size_) + " workers");
  ignore_sigpipe_if_default();
  std::string host;  // where Gloo's connections are bound, reachable by the other workers
  if (spec.mpi) {
    // Under mpirun MPI knows the workers; the service (which answers the probe that names a worker
    // at fault) takes any free port on this host and announces it over MPI.
    mpi_ = std::make_unique<MpiEngine>(rank_, size_);
    host = reachable_host(own_host_name(), workers_on_other_hosts(size_));
    service_ = std::make_unique<RendezvousService>(host, 0, rank_, rank_ == 0);
    addresses_ = mpi_->all_gather_records(host_port(host, service_->port()), MpiEngine::Clock::now() + join_timeout_);
    collective("join", [this] { agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::Join), -1, -1, 0}); });
    return;
  } else {
    // TF_CONFIG's address is this worker's port on every interface, as TensorFlow's server binds it.
    const distribute::HostPort own = distribute::split_host_port(addresses_[rank_], "worker " + std::to_string(rank_) + "'s address");
    bool elsewhere = false;  // a worker on another machine: one whose host is neither ours nor loopback
    for (const std::string& a : addresses_) {
      const std::string other = distribute::split_host_port(a, "a worker address").host;
      elsewhere = elsewhere || (other != own.host && !resolves_to_loopback(other));
    }
    host = reachable_host(own.host, elsewhere);
    const bool v6 = own.host.find(':') != std::string::npos;
    service_ = std::make_unique<RendezvousService>(v6 ? "::" : "0.0.0.0", own.port, rank_, rank_ == 0);
  }
  rendezvous(host);
}

GlooGroup::~GlooGroup() = default;

std::string GlooGroup::describe_worker(int rank) const {
  return "worker " + std::to_string(rank) + " (" + addresses_.at(static_cast<size_t>(rank)) + ")";
}

void GlooGroup::rendezvous(const std::string& host) {
  const Clock::time_point deadline = Clock::now() + join_timeout_;
  const distribute::HostPort chief = distribute::split_host_port(addresses_[0], "the chief's address");
  TcpStore store(chief.host, chief.port, describe_worker(0), deadline);

  // The chief's view of the cluster is the reference: a worker started with another says so in the
  // store before it fails, so that the chief (whose store outlives the check) fails with it.
  const std::string cluster = joined(addresses_, ",");
  const std::vector<char> claim(cluster.begin(), cluster.end());
  const auto different_cluster = [&](int r, const std::string& theirs, const std::string& chiefs) {
    return describe_worker(r) + " was started with another cluster (" + theirs + ") than the chief, " +
           describe_worker(0) + " (" + chiefs + "): every worker needs the same TF_CONFIG \"cluster\"";
  };
  if (rank_ == 0) {
    store.set("kx/cluster", claim);
  } else {
    const std::vector<char> reference = store.get("kx/cluster");
    const std::string chiefs(reference.begin(), reference.end());
    if (chiefs != cluster) {
      store.set("kx/rejected/" + std::to_string(rank_), claim);
      fail(Status::InvalidArgument, different_cluster(rank_, cluster, chiefs));
    }
  }
  // Each worker claims its rank, then waits for the others' claims.
  std::vector<char> existing;
  require(store.create("kx/worker/" + std::to_string(rank_), claim, existing), Status::InvalidArgument,
          "another process has already joined as " + describe_worker(rank_) +
              ": every worker needs its own task index (TF_CONFIG \"task\")");
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) missing.push_back(r);
  while (!missing.empty()) {
    std::vector<int> still;
    for (int r : missing) {
      if (store.try_get("kx/worker/" + std::to_string(r))) continue;
      if (std::optional<std::vector<char>> rejected = store.try_get("kx/rejected/" + std::to_string(r)))
        fail(Status::InvalidArgument, different_cluster(r, std::string(rejected->begin(), rejected->end()), cluster));
      still.push_back(r);
    }
    missing.swap(still);
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      std::vector<std::string> names;
      for (int r : missing) names.push_back(describe_worker(r));
      fail(Status::Comm, joined(names, ", ") + (missing.size() == 1 ? " has" : " have") + " not joined within " +
                             milliseconds_text(join_timeout_) + " (" + describe_worker(rank_) + " waited for them)");
    }
    std::this_thread::sleep_for(kPollPause);
  }

  // Everyone is there: Gloo connects every pair of workers through the same store.
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    device_ = gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    context_->setTimeout(std::max(left, std::chrono::milliseconds(1000)));
    context_->connectFullMesh(store, device_);
    context_->setTimeout(timeout_);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(Status::Comm, describe_worker(rank_) + " could not connect to the other workers: " + without_location(e.what()));
  }
  // The first call, checked like every other: all workers are connected and agree on who is who.
  collective("join", [this] { agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::Join), -1, -1, 0}); });
  share_host_memory();
}

void GlooGroup::share_host_memory() {
  bool wanted = true;
  try {
    wanted = config::flag("KX_SHARED_MEMORY").value_or(true);
  } catch (const Error& e) {
    shared_memory_refused_ = e.what();  // the others are already in the calls below: the first sum says so
    wanted = false;
  }
  collective("join through shared memory", [&] {
    agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::Join), -1, -1, 0});
    // Worker 0 offers its object: {ok, nonce, name}.
    struct Offer {
      uint64_t ok = 0;
      uint64_t nonce = 0;
      char name[48] = {};
    } offer;
    static_assert(sizeof(Offer) == HostMemory::kRecordBytes);
    std::optional<HostMemory> memory;
    if (rank_ == 0 && wanted) {
      try {
        memory.emplace(HostMemory::create(size_));
        offer.ok = 1;
        offer.nonce = memory->nonce();
        memory->name().copy(offer.name, sizeof offer.name - 1);
      } catch (const std::exception&) {
        // no shared memory here (/dev/shm missing or full): TCP
      }
    }
    gloo::BroadcastOptions b(context_);
    b.setOutput(reinterpret_cast<uint8_t*>(&offer), sizeof offer);
    b.setRoot(0);
    b.setTag(tag(1));
    b.setTimeout(timeout_);
    gloo::broadcast(b);
    // Each worker maps it, if it can: only a worker on worker 0's host (and in its IPC namespace) can.
    if (rank_ != 0 && wanted && offer.ok) {
      try {
        memory.emplace(HostMemory::open(std::string(offer.name, strnlen(offer.name, sizeof offer.name)), offer.nonce,
                                        rank_, size_));
      } catch (const std::exception&) {
        // another host: TCP
      }
    }
    const char mapped = memory ? 1 : 0;
    std::vector<char> all(static_cast<size_t>(size_));
    gloo::AllgatherOptions g(context_);
    g.setInput(const_cast<char*>(&mapped), 1);
    g.setOutput(all.data(), all.size());
    g.setTag(tag(2));
    g.setTimeout(timeout_);
    gloo::allgather(g);
    if (!memory) return;
    memory->unlink();  // every worker that could has mapped it (worker 0; the others hold no name)
    if (std::count(all.begin(), all.end(), 1) == size_) host_.emplace(std::move(*memory));
  });
}

void GlooGroup::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
  if (context_) context_->setTimeout(timeout);
}

std::vector<CallHeader> GlooGroup::agree(CallHeader mine) {
  std::vector<CallHeader> all(static_cast<size_t>(size_));
  if (host_) {
    static_assert(sizeof(CallHeader) <= HostMemory::kRecordBytes);
    char own[HostMemory::kRecordBytes] = {};
    std::memcpy(own, &mine, sizeof mine);
    std::vector<char> records(HostMemory::kRecordBytes * static_cast<size_t>(size_));
    host_->exchange(own, records.data(), deadline());
    for (size_t r = 0; r < all.size(); ++r) std::memcpy(&all[r], records.data() + r * HostMemory::kRecordBytes, sizeof mine);
    require_same_calls(all, [this](int r) { return describe_worker(r); });
    return all;
  }
  if (mpi_) {
    mpi_->all_gather(&mine, all.data(), sizeof mine, deadline());
    require_same_calls(all, [this](int r) { return describe_worker(r); });
    return all;
  }
  gloo::AllgatherOptions opts(context_);
  opts.setInput(&mine, 1);
  opts.setOutput(all.data(), all.size());
  opts.setTag(tag(0));
  opts.setTimeout(timeout_);
  gloo::allgather(opts);
  require_same_calls(all, [this](int r) { return describe_worker(r); });
  return all;
}

void GlooGroup::collective(const char* name, const std::function<void()>& body) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) fail(Status::Comm, *failure_);
  std::string engine_error;
  try {
    body();
    ++calls_;
    return;
  } catch (const Error& e) {
    if (e.status() != Status::Comm) {  // calls that do not match: every worker saw the same headers
      ++calls_;
      throw;
    }
    engine_error = e.what();
  } catch (const std::exception& e) {
    engine_error = without_location(e.what());
  }
  // A worker is gone, stopped, or late past the timeout: find which, tell the others at once by
  // closing this worker's connections, and keep the message for every later call.
  const std::chrono::milliseconds window = std::clamp(timeout_, std::chrono::milliseconds(250), std::chrono::milliseconds(2000));
  const std::vector<std::string> absent = find_absent_workers(rank_, addresses_, window);
  std::string message = describe_worker(rank_) + ": " + name + " failed: ";
  message += absent.empty() ? "every other worker still answers, so one is slower than the timeout (" +
                                  milliseconds_text(timeout_) + ") or in another call"
                            : joined(absent, "; ");
  failure_ = message + " [engine: " + engine_error + "]";
  try {
    if (context_) context_->closeConnections();
  } catch (const std::exception&) {
    // already closed by the peer: nothing left to tell
  }
  fail(Status::Comm, *failure_);
}

// Worker r owns part r: an all-to-all brings it every worker's copy, it adds them in rank order, and
// an all-gather hands each part from its owner to all. Each worker moves 2 (N-1)/N of the buffer, as
// a ring does, but the ring adds each chunk starting at another worker, so from 3 workers on its sums
// were not those of one process. Below a few elements per worker, every worker gathers all copies
// and adds the whole buffer itself (the same order, and no part is empty).
template <typename T>
void GlooGroup::sum_over_tcp(T* data, size_t count) {
  const auto n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  std::vector<const T*> sources;
  if (count < 64 * n) {
    received_.resize(count * n * sizeof(T));
    T* const copies = reinterpret_cast<T*>(received_.data());
    gloo::AllgatherOptions g(context_);
    g.setInput(data, count);
    g.setOutput(copies, count * n);
    g.setTag(tag(1));
    g.setTimeout(timeout_);
    gloo::allgather(g);
    for (size_t r = 0; r < n; ++r) sources.push_back(copies + r * count);
    add_in_rank_order(sources, count, data);
    return;
  }
  const auto begin = [&](size_t r) { return rank_part_begin(count, r, n); };
  const size_t mine = begin(me + 1) - begin(me);
  std::vector<int64_t> sent(n), taken(n, static_cast<int64_t>(mine));
  std::vector<size_t> parts(n);
  for (size_t r = 0; r < n; ++r) parts[r] = begin(r + 1) - begin(r), sent[r] = static_cast<int64_t>(parts[r]);
  received_.resize(mine * n * sizeof(T));
  T* const copies = reinterpret_cast<T*>(received_.data());
  gloo::AlltoallvOptions a(context_);
  a.setInput(data, sent);
  a.setOutput(copies, taken);
  a.setTag(tag(1));
  a.setTimeout(timeout_);
  gloo::alltoallv(a);
  for (size_t r = 0; r < n; ++r) sources.push_back(copies + r * mine);
  add_in_rank_order(sources, mine, copies);  // the sum over the first copy, the input of the gather
  gloo::AllgathervOptions g(context_);
  g.setInput(copies, mine);
  g.setOutput(data, parts);
  g.setTag(tag(2));
  g.setTimeout(timeout_);
  gloo::allgatherv(g);
}

void GlooGroup::all_reduce_sum(void* data, size_t count, int dtype) {
  require(dtype == KX_WORKERS_FLOAT32 || dtype == KX_WORKERS_FLOAT64, Status::InvalidArgument,
          "all_reduce_sum of an unknown element type " + std::to_string(dtype));
  require(shared_memory_refused_.empty(), Status::InvalidArgument, shared_memory_refused_);
  const size_t width = dtype == KX_WORKERS_FLOAT32 ? sizeof(float) : sizeof(double);
  collective("all_reduce_sum", [&] {
    agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::AllReduceSum), dtype, -1, count * width});
    if (count == 0) return;
    if (mpi_) return mpi_->all_reduce_sum(data, count, dtype, deadline());
    const bool floats = dtype == KX_WORKERS_FLOAT32;
    if (host_) {
      if (floats) host_->all_reduce_sum(static_cast<float*>(data), count, deadline());
      else host_->all_reduce_sum(static_cast<double*>(data), count, deadline());
      return;
    }
    if (floats) sum_over_tcp(static_cast<float*>(data), count);
    else sum_over_tcp(static_cast<double*>(data), count);
  });
}

void GlooGroup::broadcast(void* data, size_t bytes, int root) {
  collective("broadcast", [&] {
    agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::Broadcast), -1, root, bytes});
    require(root >= 0 && root < size_, Status::InvalidArgument,
            "broadcast from worker " + std::to_string(root) + ", which is not one of the " + std::to_string(size_));
    if (bytes == 0) return;
    if (mpi_) return mpi_->broadcast(data, bytes, root, deadline());
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(tag(1));
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

void GlooGroup::barrier() {
  // Swapping the headers is a barrier already: each worker's header has reached every worker.
  collective("barrier", [this] { agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::Barrier), -1, -1, 0}); });
}

void GlooGroup::all_gather(const void* data, size_t bytes, const std::function<void(int, const char*, size_t)>& sink) {
  collective("all_gather", [&] {
    const std::vector<CallHeader> all = agree(CallHeader{calls_, static_cast<uint32_t>(CallKind::AllGather), -1, -1, bytes});
    uint64_t longest = 0;
    for (const CallHeader& h : all) longest = std::max(longest, h.bytes);
    // Blobs are padded to the longest, so that Gloo's fixed-size all-gather carries them.
    std::vector<char> slots(static_cast<size_t>(longest) * static_cast<size_t>(size_));
    if (longest > 0) {
      std::vector<char> own(static_cast<size_t>(longest));
      if (bytes) std::memcpy(own.data(), data, bytes);
      if (mpi_) {
        mpi_->all_gather(own.data(), slots.data(), own.size(), deadline());
      } else {
        gloo::AllgatherOptions opts(context_);
        opts.setInput(own.data(), own.size());
        opts.setOutput(slots.data(), slots.size());
        opts.setTag(tag(1));
        opts.setTimeout(timeout_);
        gloo::allgather(opts);
      }
    }
    for (int r = 0; r < size_; ++r)
      sink(r, slots.data() + static_cast<size_t>(longest) * static_cast<size_t>(r), static_cast<size_t>(all[r].bytes));
  });
}

}  // namespace kx::workers
