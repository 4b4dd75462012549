// A parameter-server cluster as one task sees it (TF_CONFIG with chief, worker and ps tasks): who is
// who, which contiguous range of the flat parameter arena each ps holds, and the messages they send.
//
// Ranks: the chief 0, worker i at 1 + i, ps j at 1 + workers + j. Every exchange is a request from a
// client and a reply from its server: a worker asks the chief for batches and the ps tasks for
// parameters (and pushes gradients to them); the chief asks the ps tasks to take or hand over the
// whole state. A message is a fixed header and, when header.payload > 0, that many bytes after it.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster_peers.hpp"
#include "distribute/cluster_spec.hpp"
#include "kx/error.hpp"

namespace kx::distribute {

enum class PsKind : uint32_t {
  // worker -> chief
  Hello = 1,  // payload: what the worker trains, in words (must equal the chief's); reply: Ok or an error
  // a = the batch just done (-1: none), b = its rows, x = loss sum, y = correct sum, payload (with a
  // batch): its weight sum, a double; reply: Batch or End
  Next = 2,
  // chief -> worker (replies)
  Batch = 3,  // a = the global batch index (epoch * steps + step), x = the learning rate
  End = 4,    // no more batches; also chief -> ps: training is over
  // worker -> ps
  Pull = 5,   // reply payload: the shard's parameters
  Push = 6,   // x = learning rate, payload: the shard's gradient; reply a = the shard's step count
  Bye = 7,    // the worker is done with this ps
  // chief -> ps
  Init = 8,       // payload: ShardState (optimizer settings, step, spans, values)
  PullState = 9,  // reply payload: ShardState
  Ok = 10,
  Error = 11,  // status = kx::Status, payload: the message
};

struct PsHeader {
  uint32_t kind = 0;
  int32_t status = 0;
  int64_t a = 0, b = 0;
  double x = 0, y = 0;
  uint64_t payload = 0;
};
static_assert(sizeof(PsHeader) == 48, "sent as raw bytes between tasks of one build");

class PsCluster {
 public:
  enum class Role { Chief, Worker, Ps };
  // Joins every task (ClusterPeers::join).
  explicit PsCluster(const ClusterSpec& spec);

  Role role() const { return role_; }
  int rank() const { return peers_->rank(); }
  int num_workers() const { return num_workers_; }
  int num_ps() const { return num_ps_; }
  int worker_rank(int i) const { return 1 + i; }
  int ps_rank(int j) const { return 1 + num_workers_ + j; }
  // This task's index in its job (worker i, ps j; 0 for the chief).
  int task_index() const { return task_index_; }
  ClusterPeers& peers() { return *peers_; }

  // A worker may be at most this many steps ahead of the slowest live worker; 0 = unbounded.
  int staleness() const { return staleness_; }
  void set_staleness(int steps);

  // ps j's range [first, first + count) of a flat arena of n floats: contiguous, as even as possible.
  struct Range {
    int64_t first = 0, count = 0;
  };
  Range shard(int j, int64_t n) const;

  // One request and its reply (client side); an Error reply becomes the kx::Error it describes.
  // `reply_payload` receives the reply's payload (resized; its memory reused from call to call). Idle:
  // the server may hold the reply while it lives.
  PsHeader call(int server, const PsHeader& request, const void* payload, std::vector<char>* reply_payload,
                ClusterPeers::Wait wait = ClusterPeers::Wait::Reply);
  // Server side: the next request of `client` (false when `stop` ended the wait), and the reply.
  bool next_request(int client, PsHeader& request, std::vector<char>& payload, const std::function<bool()>& stop);
  void reply(int client, const PsHeader& reply, const void* payload);
  void reply_error(int client, Status status, const std::string& message);

 private:
  std::unique_ptr<ClusterPeers> peers_;
  Role role_ = Role::Worker;
  int num_workers_ = 0, num_ps_ = 0, task_index_ = 0;
  int staleness_ = 0;
};

}  // namespace kx::distribute
