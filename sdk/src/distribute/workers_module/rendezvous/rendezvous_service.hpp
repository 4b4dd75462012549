// The small TCP service every worker runs on its own address while its group lives. The chief's holds
// the key-value store that the workers meet through when they join (Gloo's connection addresses);
// every worker's answers pings, so that after a failed operation the survivors can tell which worker
// is gone (nothing listens) from which is stopped or hung (it accepts but never answers).
#pragma once
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "distribute/workers_module/rendezvous/rendezvous_protocol.hpp"
#include "distribute/workers_module/rendezvous/socket_io.hpp"

namespace kx::workers {

class RendezvousService {
 public:
  // Listens on host:port (0: any free port); Status::Comm when it cannot.
  RendezvousService(const std::string& host, int port, int rank, bool serves_store);
  ~RendezvousService();
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  int port() const { return port_; }

 private:
  void serve();
  void answer(int fd);
  Response handle(const Request& request);

  Socket listener_;
  Socket wake_;  // an eventfd: written once to stop serve()
  int port_;
  int rank_;
  bool serves_store_;
  std::map<std::string, std::vector<char>> store_;  // touched by the service thread only
  std::thread thread_;                               // last: starts once the rest is set
};

}  // namespace kx::workers
