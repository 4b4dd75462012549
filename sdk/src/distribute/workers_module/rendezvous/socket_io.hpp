// The few TCP operations the rendezvous needs (bootstrap and liveness only; tensors travel over Gloo's
// own connections): every one bounded by a deadline, none raising SIGPIPE.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace kx::workers {

using Clock = std::chrono::steady_clock;

// An owned file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// A listening socket on host:port (port 0: any free port); Status::Comm naming `what` on failure.
Socket listen_on(const std::string& host, int port, const std::string& what);
int local_port(const Socket& listening);

// How an attempt to reach a peer ended. Closed: connected, then the peer closed or reset the
// connection before it answered (a process being killed can still accept a connection it will not serve).
enum class Reach { Ok, Refused, TimedOut, Failed, Closed };

struct Connection {
  Reach result = Reach::Failed;
  Socket socket;        // valid when result == Ok
  std::string error;    // why not, when result != Ok
};
Connection connect_to(const std::string& host, int port, Clock::time_point deadline);

// All `bytes`: Ok, or TimedOut / Closed (reset, or the peer closed) / Failed with the reason in `error`.
Reach send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline, std::string& error);
Reach recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline, std::string& error);

}  // namespace kx::workers
