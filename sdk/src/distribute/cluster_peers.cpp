#include "distribute/cluster_peers.hpp"

#include <algorithm>
#include <array>

#include "distribute/workers_module.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

using MessageBuffer = std::array<char, 2048>;
using Clock = std::chrono::steady_clock;

// Between two looks at the peer.
constexpr std::chrono::milliseconds kSlice{250};
// How long a living peer has to answer a ping.
constexpr std::chrono::milliseconds kProbeWindow{1000};

void check(int32_t status, const MessageBuffer& message) {
  if (status == 0) return;
  const std::string text = message[0] ? std::string(message.data()) : "engine error " + std::to_string(status);
  throw Error(static_cast<Status>(status), text);
}

}  // namespace

ClusterPeers::ClusterPeers(JoinKey, const kx_workers_api* api, kx_workers_peers* handle, int rank,
                           std::vector<std::string> names, std::vector<std::string> addresses,
                           std::chrono::milliseconds timeout)
    : api_(api), handle_(handle), rank_(rank), names_(std::move(names)), addresses_(std::move(addresses)), timeout_(timeout) {}

ClusterPeers::~ClusterPeers() { api_->peers_leave(handle_); }

std::unique_ptr<ClusterPeers> ClusterPeers::join(const ClusterSpec& spec, std::chrono::milliseconds timeout) {
  require(timeout.count() > 0, Status::InvalidArgument, "the timeout must be positive");
  require(spec.num_ps > 0 && spec.task_rank >= 0, Status::InvalidArgument,
          "TF_CONFIG has no \"ps\" task: a parameter-server cluster needs a chief, workers and ps tasks");
  const WorkersModule& module = WorkersModule::instance();
  require(module.api() != nullptr, Status::Unsupported,
          "the parameter-server strategy needs the engine module: " + module.status());
  require(module.api()->interface_version >= 2 && module.api()->peers_join != nullptr, Status::Unsupported,
          "the engine module has no point-to-point messages (interface " +
              std::to_string(module.api()->interface_version) + "): install matching kx packages");
  std::vector<const char*> addresses, names;
  for (const std::string& a : spec.task_addresses) addresses.push_back(a.c_str());
  for (const std::string& n : spec.task_names) names.push_back(n.c_str());
  kx_workers_join_args args{};
  args.struct_size = sizeof args;
  args.launcher = KX_WORKERS_LAUNCH_TF_CONFIG;
  args.rank = spec.task_rank;
  args.size = static_cast<int32_t>(addresses.size());
  args.addresses = addresses.data();
  args.names = names.data();
  args.timeout_ms = timeout.count();
  kx_workers_peers* handle = nullptr;
  MessageBuffer message{};
  check(module.api()->peers_join(&args, &handle, message.data(), message.size()), message);
  require(handle != nullptr, Status::Internal, "the engine module joined no group");
  return std::make_unique<ClusterPeers>(JoinKey{}, module.api(), handle, spec.task_rank, spec.task_names,
                                        spec.task_addresses, timeout);
}

std::string ClusterPeers::describe(int rank) const {
  if (rank < 0 || rank >= size()) return "task " + std::to_string(rank);
  return names_[static_cast<size_t>(rank)] + " (" + addresses_[static_cast<size_t>(rank)] + ")";
}

void ClusterPeers::set_timeout(std::chrono::milliseconds timeout) {
  require(timeout.count() > 0, Status::InvalidArgument, "the timeout must be positive");
  timeout_ = timeout;
}

void ClusterPeers::probe(int rank) {
  MessageBuffer message{};
  const auto window = std::min(timeout_, kProbeWindow);
  check(api_->peers_probe(handle_, rank, window.count(), message.data(), message.size()), message);
}

bool ClusterPeers::transfer(bool sending, int rank, uint32_t tag, void* data, size_t bytes, Wait wait,
                            const std::function<bool()>& stop) {
  const Clock::time_point give_up = Clock::now() + timeout_;
  for (;;) {
    MessageBuffer message{};
    const int64_t slice = std::min(timeout_, kSlice).count();
    const int32_t code = sending ? api_->peers_send(handle_, rank, tag, data, bytes, slice, message.data(), message.size())
                                 : api_->peers_recv(handle_, rank, tag, data, bytes, slice, message.data(), message.size());
    if (code == 0) return true;
    if (code != KX_WORKERS_PENDING) check(code, message);
    if (stop && stop()) return false;
    probe(rank);  // gone or stopped: Comm naming it
    if (wait == Wait::Reply && Clock::now() >= give_up)
      fail(Status::Comm, describe(rank) + " is alive but did not answer within the timeout (" +
                             std::to_string(timeout_.count()) + " ms)");
  }
}

bool ClusterPeers::send(int rank, uint32_t tag, const void* data, size_t bytes, Wait wait,
                        const std::function<bool()>& stop) {
  return transfer(true, rank, tag, const_cast<void*>(data), bytes, wait, stop);
}

bool ClusterPeers::recv(int rank, uint32_t tag, void* data, size_t bytes, Wait wait, const std::function<bool()>& stop) {
  return transfer(false, rank, tag, data, bytes, wait, stop);
}

}  // namespace kx::distribute
