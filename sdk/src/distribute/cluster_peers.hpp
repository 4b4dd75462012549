// The tasks of a parameter-server cluster (chief, workers, ps), each able to send tagged messages to
// any other over the engine module's point-to-point connections. A peer that dies fails only the
// messages with it: the others go on. Every wait probes the peer while it lasts, so that a dead or
// stopped peer is a Status::Comm naming it within the timeout, never a hang.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster_spec.hpp"
#include "distribute/workers_module_api.h"

namespace kx::distribute {

class ClusterPeers {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{60000};

  // Joins every task of spec (its TF_CONFIG has a "ps" job); returns once all have joined. Unsupported
  // without the engine module, Comm when the others do not all arrive within `timeout`.
  static std::unique_ptr<ClusterPeers> join(const ClusterSpec& spec, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~ClusterPeers();
  ClusterPeers(const ClusterPeers&) = delete;
  ClusterPeers& operator=(const ClusterPeers&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(names_.size()); }
  // "ps 0 (127.0.0.1:2224)"
  std::string describe(int rank) const;
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout);

  // How long a message may take. Reply: the peer answers a request of ours, within the timeout.
  // Idle: the peer may take as long as it likes while it is alive (a server waiting for its next
  // request, a worker held back by the chief); `stop`, when given, is asked between probes and ends
  // the wait (the call then returns false).
  enum class Wait { Reply, Idle };
  // The whole message, or Comm naming the peer (its connection failed, it is gone or silent, or a
  // Reply wait ran past the timeout). Messages of one (peer, tag, direction) are received in order
  // and must have the size the receiver asks for.
  bool send(int rank, uint32_t tag, const void* data, size_t bytes, Wait wait, const std::function<bool()>& stop = {});
  bool recv(int rank, uint32_t tag, void* data, size_t bytes, Wait wait, const std::function<bool()>& stop = {});
  // Comm naming the peer unless it is alive.
  void probe(int rank);

  class JoinKey {
    friend class ClusterPeers;
    JoinKey() = default;
  };
  ClusterPeers(JoinKey, const kx_workers_api* api, kx_workers_peers* handle, int rank, std::vector<std::string> names,
               std::vector<std::string> addresses, std::chrono::milliseconds timeout);

 private:
  bool transfer(bool sending, int rank, uint32_t tag, void* data, size_t bytes, Wait wait,
                const std::function<bool()>& stop);

  const kx_workers_api* api_;
  kx_workers_peers* handle_;
  int rank_;
  std::vector<std::string> names_;
  std::vector<std::string> addresses_;
  std::chrono::milliseconds timeout_;
};

}  // namespace kx::distribute
