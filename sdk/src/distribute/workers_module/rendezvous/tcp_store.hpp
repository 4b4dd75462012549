// Gloo's rendezvous store, served by the chief's RendezvousService over TCP: what Gloo's own
// connectFullMesh uses to swap connection addresses (Debian's Gloo has file, hash and Redis stores,
// none of which spans hosts without a third service). Every call retries until the join deadline,
// as workers start in any order.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "distribute/workers_module/rendezvous/rendezvous_protocol.hpp"

namespace kx::workers {

class TcpStore : public gloo::rendezvous::Store {
 public:
  // chief_name ("worker 0 (host:port)") is for messages.
  TcpStore(std::string chief_host, int chief_port, std::string chief_name, Clock::time_point deadline);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key until the deadline (Gloo reads keys that other workers may not have set yet).
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // key := value unless the key exists: true when this call set it; `existing` gets what is there.
  bool create(const std::string& key, const std::vector<char>& value, std::vector<char>& existing);
  // The value if the key is there now.
  std::optional<std::vector<char>> try_get(const std::string& key);
  Clock::time_point deadline() const { return deadline_; }

 private:
  Response request(const Request& r);

  std::string host_;
  int port_;
  std::string chief_name_;
  Clock::time_point deadline_;
};

}  // namespace kx::workers
