#include "distribute/workers_module/rendezvous/tcp_store.hpp"

#include <algorithm>
#include <thread>

#include "kx/error.hpp"

namespace kx::workers {
namespace {

constexpr std::chrono::milliseconds kRetryPause{20};
// One attempt may take this long before it is retried (a chief that is busy starting).
constexpr std::chrono::milliseconds kAttempt{2000};

}  // namespace

TcpStore::TcpStore(std::string chief_host, int chief_port, std::string chief_name, Clock::time_point deadline)
    : host_(std::move(chief_host)), port_(chief_port), chief_name_(std::move(chief_name)), deadline_(deadline) {}

Response TcpStore::request(const Request& r) {
  // At least one whole attempt, even at the deadline: the callers' wait loops report their own
  // timeouts, which say more than a request that ran out of time.
  const Clock::time_point until = std::max(deadline_, Clock::now() + kAttempt);
  for (;;) {
    const CallResult c = call(host_, port_, r, std::min(until, Clock::now() + kAttempt));
    if (c.reach == Reach::Ok) {
      require(c.response.reply != Reply::Refused, Status::InvalidArgument,
              chief_name_ + " answers but holds no rendezvous: is it started as the chief (worker 0) of this cluster?");
      return c.response;
    }
    if (Clock::now() + kRetryPause >= until)
      fail(Status::Comm, "could not reach the rendezvous of " + chief_name_ + " in time (" + c.error +
                             "): is it started, with the same TF_CONFIG cluster?");
    std::this_thread::sleep_for(kRetryPause);
  }
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) { request({Op::Set, key, data}); }

std::optional<std::vector<char>> TcpStore::try_get(const std::string& key) {
  Response r = request({Op::Get, key, {}});
  if (r.reply != Reply::Ok) return std::nullopt;
  return std::move(r.value);
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key});
  std::optional<std::vector<char>> v = try_get(key);
  require(v.has_value(), Status::Internal, "rendezvous key " + key + " vanished");
  return std::move(*v);
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, std::chrono::milliseconds::max()); }

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const Clock::time_point until =
      timeout == std::chrono::milliseconds::max() ? deadline_ : std::min(deadline_, Clock::now() + timeout);
  for (const std::string& key : keys) {
    while (!try_get(key)) {
      if (Clock::now() >= until)
        fail(Status::Comm, "the workers did not all reach the rendezvous in time (waited for \"" + key + "\" at " +
                               chief_name_ + ")");
      std::this_thread::sleep_for(kRetryPause);
    }
  }
}

bool TcpStore::create(const std::string& key, const std::vector<char>& value, std::vector<char>& existing) {
  Response r = request({Op::Create, key, value});
  existing = std::move(r.value);
  return r.reply == Reply::Ok;
}

}  // namespace kx::workers
