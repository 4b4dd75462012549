// The tasks of a parameter-server cluster (chief, workers, ps) connected pairwise over Gloo's TCP
// transport, exchanging tagged point-to-point messages (Gloo's unbound buffers). Unlike GlooGroup,
// whose collectives need every worker, a failed connection fails only the operations with that peer:
// a ps keeps serving the workers that are left when one dies.
//
// Waits are bounded by the caller and never by Gloo's own timeout (WaitAlarm says why); an operation
// that is not done in time stays posted, so the caller may wait on it again.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "distribute/workers_module/peers/wait_alarm.hpp"
#include "distribute/workers_module/rendezvous/rendezvous_service.hpp"

namespace kx::workers {

struct PeerSpec {
  int rank = 0;
  std::vector<std::string> addresses;  // every task's "host:port", rank order; rank 0 holds the rendezvous
  std::vector<std::string> names;      // for messages ("chief", "ps 0"); empty: "task N"
  std::chrono::milliseconds join_timeout{60000};
};

class PeerGroup {
 public:
  enum class Outcome { Done, Pending };

  // Returns once every task has joined; Comm when they do not within spec.join_timeout,
  // InvalidArgument when two claim one rank or the tasks were started with different clusters.
  explicit PeerGroup(const PeerSpec& spec);
  ~PeerGroup();
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;

  const std::string& address(int rank) const { return addresses_.at(static_cast<size_t>(rank)); }
  // "ps 0 (127.0.0.1:2224)"
  std::string describe(int rank) const;

  // Comm when the connection with `rank` has failed (now or before); Pending when the peer has not
  // taken / sent the message by `deadline`.
  Outcome send(int rank, uint32_t tag, const void* data, size_t bytes, WaitAlarm::Clock::time_point deadline);
  Outcome recv(int rank, uint32_t tag, void* data, size_t bytes, WaitAlarm::Clock::time_point deadline);
  // Comm unless the peer's process answers a ping within `window` (and its connection still works).
  void probe(int rank, std::chrono::milliseconds window);

 private:
  // One posted operation per (peer, tag, direction), with the memory Gloo writes or reads: kept until
  // the group ends, since Gloo holds a raw pointer to it while the operation is posted.
  struct Slot {
    std::vector<char> bytes;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    bool posted = false;
  };
  using SlotKey = std::tuple<int, uint32_t, bool>;  // peer, tag, receive

  void rendezvous(const std::string& host, const std::string& cluster);
  Slot& slot(int rank, uint32_t tag, bool recv, size_t bytes);
  void require_peer(int rank, const char* what);
  // Records that the connection with `rank` failed (the first reason is kept) and throws Comm.
  [[noreturn]] void peer_failed(int rank, const std::string& why);
  Outcome wait(Slot& s, bool recv, WaitAlarm::Clock::time_point deadline, int rank);

  int rank_;
  int size_;
  std::vector<std::string> addresses_;
  std::vector<std::string> names_;
  std::chrono::milliseconds join_timeout_;
  std::mutex mutex_;                   // slots_ and failed_
  std::map<int, std::string> failed_;  // peers whose connection failed, and why
  // Torn down last-to-first: the alarm, Gloo's connections, its device (event loop), then the slots
  // Gloo may still point at, then the rendezvous service.
  std::unique_ptr<RendezvousService> service_;
  std::map<SlotKey, std::unique_ptr<Slot>> slots_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  WaitAlarm alarm_;
};

}  // namespace kx::workers
