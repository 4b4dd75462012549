#include "distribute/workers_module/peers/peer_group.hpp"

#include <signal.h>

#include <cstring>
#include <thread>

#include <gloo/transport/tcp/device.h>

#include "distribute/host_port.hpp"
#include "distribute/workers_module/rendezvous/local_address.hpp"
#include "distribute/workers_module/rendezvous/peer_probe.hpp"
#include "distribute/workers_module/rendezvous/tcp_store.hpp"
#include "kx/error.hpp"

namespace kx::workers {
namespace {

// Gloo's own timeout, never reached: WaitAlarm ends every wait first.
constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);
constexpr std::chrono::milliseconds kPollPause{20};
constexpr std::chrono::milliseconds kVerdictWindow{500};

// A peer that vanishes mid-write must fail the operation, not end this process (Gloo uses writev).
void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

// Gloo's messages start with "[/path/file.cc:123] ".
std::string without_location(const std::string& what) {
  if (!what.empty() && what.front() == '[') {
    const size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  return std::to_string(ms.count() / 1000) + "." + std::to_string(ms.count() % 1000 / 100) + " s";
}

}  // namespace

PeerGroup::PeerGroup(const PeerSpec& spec)
    : rank_(spec.rank),
      size_(static_cast<int>(spec.addresses.size())),
      addresses_(spec.addresses),
      names_(spec.names),
      join_timeout_(spec.join_timeout) {
  require(size_ >= 2 && rank_ >= 0 && rank_ < size_, Status::InvalidArgument,
          "task " + std::to_string(rank_) + " of " + std::to_string(size_));
  require(names_.empty() || names_.size() == addresses_.size(), Status::InvalidArgument,
          std::to_string(names_.size()) + " task names for " + std::to_string(size_) + " tasks");
  ignore_sigpipe_if_default();
  const distribute::HostPort own = distribute::split_host_port(addresses_[rank_], describe(rank_) + "'s address");
  bool elsewhere = false;  // a task on another machine
  std::string cluster;
  for (const std::string& a : addresses_) {
    const std::string other = distribute::split_host_port(a, "a task address").host;
    elsewhere = elsewhere || (other != own.host && !resolves_to_loopback(other));
    cluster += (cluster.empty() ? "" : ",") + a;
  }
  const std::string host = reachable_host(own.host, elsewhere);
  const bool v6 = own.host.find(':') != std::string::npos;
  service_ = std::make_unique<RendezvousService>(v6 ? "::" : "0.0.0.0", own.port, rank_, rank_ == 0);
  rendezvous(host, cluster);
}

PeerGroup::~PeerGroup() = default;

std::string PeerGroup::describe(int rank) const {
  const std::string name = names_.empty() ? "task " + std::to_string(rank) : names_.at(static_cast<size_t>(rank));
  return name + " (" + addresses_.at(static_cast<size_t>(rank)) + ")";
}

void PeerGroup::rendezvous(const std::string& host, const std::string& cluster) {
  const Clock::time_point deadline = Clock::now() + join_timeout_;
  const distribute::HostPort chief = distribute::split_host_port(addresses_[0], "the chief's address");
  TcpStore store(chief.host, chief.port, describe(0), deadline);
  // Each task claims its rank with its view of the cluster, then waits for the others' claims.
  const std::vector<char> claim(cluster.begin(), cluster.end());
  std::vector<char> existing;
  require(store.create("kx/peer/" + std::to_string(rank_), claim, existing), Status::InvalidArgument,
          "another process has already joined as " + describe(rank_) + ": every task needs its own TF_CONFIG \"task\"");
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (;;) {
      if (const std::optional<std::vector<char>> theirs = store.try_get("kx/peer/" + std::to_string(r))) {
        require(*theirs == claim, Status::InvalidArgument,
                describe(r) + " was started with another cluster (" + std::string(theirs->begin(), theirs->end()) +
                    ") than " + describe(rank_) + " (" + cluster + "): every task needs the same TF_CONFIG \"cluster\"");
        break;
      }
      require(Clock::now() < deadline, Status::Comm,
              describe(r) + " has not joined within " + seconds_text(join_timeout_) + " (" + describe(rank_) +
                  " waited for it)");
      std::this_thread::sleep_for(kPollPause);
    }
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    device_ = gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    context_->setTimeout(std::max(left, std::chrono::milliseconds(1000)));
    context_->connectFullMesh(store, device_);
    context_->setTimeout(kForever);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(Status::Comm, describe(rank_) + " could not connect to the other tasks: " + without_location(e.what()));
  }
}

void PeerGroup::require_peer(int rank, const char* what) {
  require(rank >= 0 && rank < size_ && rank != rank_, Status::InvalidArgument,
          std::string(what) + " with task " + std::to_string(rank) + ", which is not another of the " +
              std::to_string(size_) + " tasks");
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = failed_.find(rank); it != failed_.end()) fail(Status::Comm, it->second);
}

void PeerGroup::peer_failed(int rank, const std::string& why) {
  std::string message;
  try {
    probe(rank, kVerdictWindow);
    message = describe(rank) + " lost its connection with " + describe(rank_) + " [engine: " + why + "]";
  } catch (const Error& e) {
    message = std::string(e.what()) + " [engine: " + why + "]";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& kept = failed_.emplace(rank, message).first->second;
  fail(Status::Comm, kept);
}

void PeerGroup::probe(int rank, std::chrono::milliseconds window) {
  require_peer(rank, "probe");
  const distribute::HostPort at = distribute::split_host_port(addresses_[rank], describe(rank) + "'s address");
  const CallResult r = call(at.host, at.port, Request{Op::Ping, {}, {}}, Clock::now() + window);
  const std::string unanswered = describe_unanswered(describe(rank), r, window);
  if (!unanswered.empty()) fail(Status::Comm, unanswered);
}

PeerGroup::Slot& PeerGroup::slot(int rank, uint32_t tag, bool recv, size_t bytes) {
  require(bytes > 0, Status::InvalidArgument, "a point-to-point message needs at least one byte");
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Slot>& s = slots_[SlotKey{rank, tag, recv}];
  if (!s) s = std::make_unique<Slot>();
  if (s->buffer && s->bytes.size() == bytes) return *s;
  require(!s->posted, Status::Misuse,
          std::string(recv ? "a receive" : "a send") + " of " + std::to_string(bytes) + " bytes on tag " +
              std::to_string(tag) + " while one of " + std::to_string(s->bytes.size()) + " bytes is still posted");
  s->buffer.reset();
  s->bytes.assign(bytes, 0);
  s->buffer = context_->createUnboundBuffer(s->bytes.data(), bytes);
  return *s;
}

PeerGroup::Outcome PeerGroup::wait(Slot& s, bool recv, WaitAlarm::Clock::time_point deadline, int rank) {
  bool done = false;
  std::string error;
  try {
    WaitAlarm::Armed armed(alarm_, s.buffer.get(), recv, deadline);
    done = recv ? s.buffer->waitRecv(nullptr, kForever) : s.buffer->waitSend(nullptr, kForever);
  } catch (const std::exception& e) {
    error = without_location(e.what());
  }
  if (!error.empty()) peer_failed(rank, error);
  if (!done) return Outcome::Pending;
  s.posted = false;
  return Outcome::Done;
}

PeerGroup::Outcome PeerGroup::send(int rank, uint32_t tag, const void* data, size_t bytes,
                                   WaitAlarm::Clock::time_point deadline) {
  require_peer(rank, "send");
  Slot& s = slot(rank, tag, false, bytes);
  if (!s.posted) {
    std::memcpy(s.bytes.data(), data, bytes);
    try {
      s.buffer->send(rank, tag, 0, bytes);
    } catch (const std::exception& e) {
      peer_failed(rank, without_location(e.what()));
    }
    s.posted = true;
  }
  return wait(s, false, deadline, rank);
}

PeerGroup::Outcome PeerGroup::recv(int rank, uint32_t tag, void* data, size_t bytes,
                                   WaitAlarm::Clock::time_point deadline) {
  require_peer(rank, "receive");
  Slot& s = slot(rank, tag, true, bytes);
  if (!s.posted) {
    try {
      s.buffer->recv(rank, tag, 0, bytes);
    } catch (const std::exception& e) {
      peer_failed(rank, without_location(e.what()));
    }
    s.posted = true;
  }
  const Outcome o = wait(s, true, deadline, rank);
  if (o == Outcome::Done) std::memcpy(data, s.bytes.data(), bytes);
  return o;
}

}  // namespace kx::workers
