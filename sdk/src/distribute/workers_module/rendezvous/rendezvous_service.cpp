#include "distribute/workers_module/rendezvous/rendezvous_service.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "kx/error.hpp"

namespace kx::workers {
namespace {

// A peer gets this long to send its request and take the answer: a stopped peer must not hold up
// the service for the others.
constexpr std::chrono::milliseconds kPerRequest{1000};

}  // namespace

RendezvousService::RendezvousService(const std::string& host, int port, int rank, bool serves_store)
    : listener_(listen_on(host, port, "worker " + std::to_string(rank) + "'s address")),
      wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      port_(local_port(listener_)),
      rank_(rank),
      serves_store_(serves_store) {
  require(wake_.valid(), Status::Comm, std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { serve(); });
}

RendezvousService::~RendezvousService() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_.fd(), &one, sizeof one);
  thread_.join();
}

void RendezvousService::serve() {
  for (;;) {
    pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (fds[0].revents & POLLIN) {
      Socket peer(accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (peer.valid()) answer(peer.fd());
    }
  }
}

void RendezvousService::answer(int fd) {
  const Clock::time_point deadline = Clock::now() + kPerRequest;
  std::string error;  // a peer that sends nothing useful is dropped: it learns from its own timeout
  Request request;
  if (read_request(fd, request, deadline, error) != Reach::Ok) return;
  write_response(fd, handle(request), deadline, error);
}

Response RendezvousService::handle(const Request& request) {
  Response r;
  if (request.op == Op::Ping) {
    const std::string rank = std::to_string(rank_);
    r.value.assign(rank.begin(), rank.end());
    return r;
  }
  if (!serves_store_) {
    r.reply = Reply::Refused;  // only the chief holds the store
    return r;
  }
  const auto it = store_.find(request.key);
  switch (request.op) {
    case Op::Set:
      store_[request.key] = request.value;
      break;
    case Op::Get:
      if (it == store_.end()) r.reply = Reply::NotFound;
      else r.value = it->second;
      break;
    case Op::Create:
      if (it == store_.end()) {
        store_.emplace(request.key, request.value);
      } else {
        r.reply = Reply::Exists;
        r.value = it->second;
      }
      break;
    case Op::Ping:
      break;
  }
  return r;
}

}  // namespace kx::workers
