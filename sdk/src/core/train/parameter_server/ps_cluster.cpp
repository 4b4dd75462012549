#include "core/train/parameter_server/ps_cluster.hpp"

#include "core/train/data_feed.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

// A request travels client -> server on two tags, its reply server -> client on two others.
constexpr uint32_t kRequestHeader = 1, kRequestPayload = 2, kReplyHeader = 3, kReplyPayload = 4;

}  // namespace

PsCluster::PsCluster(const ClusterSpec& spec) {
  require(spec.launcher == ClusterSpec::Launcher::TfConfig && spec.num_ps > 0, Status::InvalidArgument,
          "a parameter-server strategy needs TF_CONFIG with \"ps\" tasks, e.g. {\"cluster\": {\"chief\": [\"h:2222\"], "
          "\"worker\": [\"h:2223\", \"h:2224\"], \"ps\": [\"h:2225\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}");
  bool has_chief = false;
  for (const ClusterSpec::Job& j : spec.jobs) {
    if (j.name == "chief") has_chief = true;
    if (j.name == "worker") num_workers_ = static_cast<int>(j.addresses.size());
  }
  require(has_chief && num_workers_ > 0, Status::InvalidArgument,
          "TF_CONFIG: a parameter-server cluster needs a \"chief\" task (it coordinates) and at least one \"worker\"");
  require(spec.task_type != "evaluator", Status::InvalidArgument,
          "TF_CONFIG: an \"evaluator\" task has no part in parameter-server training");
  num_ps_ = spec.num_ps;
  task_index_ = spec.task_index;
  role_ = spec.task_type == "chief" ? Role::Chief : spec.task_type == "ps" ? Role::Ps : Role::Worker;
  peers_ = ClusterPeers::join(spec);
}

void PsCluster::set_staleness(int steps) {
  require(steps >= 0, Status::InvalidArgument, "staleness must be >= 0 (0 = unbounded), got " + std::to_string(steps));
  staleness_ = steps;
}

PsCluster::Range PsCluster::shard(int j, int64_t n) const {
  const core::Slice s = core::replica_slice(j, num_ps_, n);
  return {s.first, s.rows};
}

PsHeader PsCluster::call(int server, const PsHeader& request, const void* payload, std::vector<char>* reply_payload,
                         ClusterPeers::Wait wait) {
  peers_->send(server, kRequestHeader, &request, sizeof request, ClusterPeers::Wait::Reply);
  if (request.payload > 0)
    peers_->send(server, kRequestPayload, payload, static_cast<size_t>(request.payload), ClusterPeers::Wait::Reply);
  PsHeader reply;
  peers_->recv(server, kReplyHeader, &reply, sizeof reply, wait);
  std::vector<char> discarded;
  std::vector<char>& bytes = reply_payload && reply.kind != static_cast<uint32_t>(PsKind::Error) ? *reply_payload : discarded;
  bytes.resize(static_cast<size_t>(reply.payload));
  if (reply.payload > 0) peers_->recv(server, kReplyPayload, bytes.data(), bytes.size(), ClusterPeers::Wait::Reply);
  if (reply.kind == static_cast<uint32_t>(PsKind::Error))
    fail(static_cast<Status>(reply.status), std::string(bytes.begin(), bytes.end()));
  return reply;
}

bool PsCluster::next_request(int client, PsHeader& request, std::vector<char>& payload, const std::function<bool()>& stop) {
  if (!peers_->recv(client, kRequestHeader, &request, sizeof request, ClusterPeers::Wait::Idle, stop)) return false;
  payload.resize(static_cast<size_t>(request.payload));
  if (request.payload > 0)
    peers_->recv(client, kRequestPayload, payload.data(), payload.size(), ClusterPeers::Wait::Reply);
  return true;
}

void PsCluster::reply(int client, const PsHeader& reply, const void* payload) {
  peers_->send(client, kReplyHeader, &reply, sizeof reply, ClusterPeers::Wait::Reply);
  if (reply.payload > 0) peers_->send(client, kReplyPayload, payload, static_cast<size_t>(reply.payload), ClusterPeers::Wait::Reply);
}

void PsCluster::reply_error(int client, Status status, const std::string& message) {
  PsHeader h;
  h.kind = static_cast<uint32_t>(PsKind::Error);
  h.status = static_cast<int32_t>(status);
  h.payload = message.size();
  reply(client, h, message.data());
}

}  // namespace kx::distribute
