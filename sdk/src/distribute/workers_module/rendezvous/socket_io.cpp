#include "distribute/workers_module/rendezvous/socket_io.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "kx/error.hpp"

namespace kx::workers {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoList resolve(const std::string& host, int port, bool passive, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return nullptr;
  }
  return AddrInfoList(list);
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on fd: Ok, or TimedOut / Failed with the reason.
Reach wait_for(int fd, short events, Clock::time_point deadline, std::string& error) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return Reach::Ok;
    if (rc == 0) {
      error = "no answer in time";
      return Reach::TimedOut;
    }
    if (errno != EINTR) {
      error = std::string("poll: ") + std::strerror(errno);
      return Reach::Failed;
    }
  }
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

int Socket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

Socket listen_on(const std::string& host, int port, const std::string& what) {
  std::string error;
  AddrInfoList list = resolve(host, port, true, error);
  for (addrinfo* a = list.get(); a; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s.valid()) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // a restarted job reuses its ports at once
    if (bind(s.fd(), a->ai_addr, a->ai_addrlen) == 0 && listen(s.fd(), 128) == 0) return s;
    error = std::strerror(errno);
  }
  fail(Status::Comm, "cannot listen on " + what + " " + host + ":" + std::to_string(port) + ": " + error);
}

int local_port(const Socket& listening) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(listening.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

Connection connect_to(const std::string& host, int port, Clock::time_point deadline) {
  Connection c;
  AddrInfoList list = resolve(host, port, false, c.error);
  if (!list) return c;
  for (addrinfo* a = list.get(); a; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s.valid()) {
      c.error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int rc = connect(s.fd(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      c.result = wait_for(s.fd(), POLLOUT, deadline, c.error);
      if (c.result != Reach::Ok) continue;
      int so_error = 0;
      socklen_t len = sizeof so_error;
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      rc = so_error == 0 ? 0 : -1;
      errno = so_error;
    }
    if (rc == 0) {
      const int on = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      c.result = Reach::Ok;
      c.socket = std::move(s);
      c.error.clear();
      return c;
    }
    c.result = errno == ECONNREFUSED ? Reach::Refused : errno == ECONNRESET ? Reach::Closed : Reach::Failed;
    c.error = std::strerror(errno);
  }
  return c;
}

Reach send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline, std::string& error) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (const Reach r = wait_for(fd, POLLOUT, deadline, error); r != Reach::Ok) return r;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      error = std::strerror(errno);
      return errno == ECONNRESET || errno == EPIPE ? Reach::Closed : Reach::Failed;
    }
  }
  return Reach::Ok;
}

Reach recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline, std::string& error) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      error = "connection closed";
      return Reach::Closed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (const Reach r = wait_for(fd, POLLIN, deadline, error); r != Reach::Ok) return r;
    } else if (errno != EINTR) {
      error = std::strerror(errno);
      return errno == ECONNRESET ? Reach::Closed : Reach::Failed;
    }
  }
  return Reach::Ok;
}

}  // namespace kx::workers
