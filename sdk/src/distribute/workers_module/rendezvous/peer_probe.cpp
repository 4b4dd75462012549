#include "distribute/workers_module/rendezvous/peer_probe.hpp"

#include <thread>
#include <utility>

#include "distribute/host_port.hpp"

namespace kx::workers {
namespace {

std::string seconds(std::chrono::milliseconds ms) {
  const long long tenths = (ms.count() + 50) / 100;
  std::string text = std::to_string(tenths / 10);
  if (tenths % 10) text += '.' + std::to_string(tenths % 10);
  return text + " s";
}

}  // namespace

std::string describe_unanswered(const std::string& name, const CallResult& r, std::chrono::milliseconds window) {
  switch (r.reach) {
    case Reach::Ok: return "";
    case Reach::Refused: return name + " is gone (nothing listens at its address: it exited or was killed)";
    case Reach::Closed: return name + " is gone (it closed the connection without answering: it exited or was killed)";
    case Reach::TimedOut: return name + " does not answer (stopped or hung: no reply within " + seconds(window) + ")";
    case Reach::Failed: break;
  }
  return name + " cannot be reached (" + r.error + ")";
}

std::vector<std::string> find_absent_workers(int self, const std::vector<std::string>& addresses,
                                             std::chrono::milliseconds window) {
  const Clock::time_point deadline = Clock::now() + window;
  std::vector<distribute::HostPort> at;  // parsed here: nothing may throw inside the threads
  for (const std::string& a : addresses) at.push_back(distribute::split_host_port(a, "worker address"));
  std::vector<CallResult> results(addresses.size());
  {
    std::vector<std::thread> probes;
    for (size_t i = 0; i < addresses.size(); ++i) {
      if (static_cast<int>(i) == self) continue;
      probes.emplace_back([&, i] {
        try {
          results[i] = call(at[i].host, at[i].port, Request{Op::Ping, {}, {}}, deadline);
        } catch (const std::exception& e) {  // out of memory: reported, never terminate()
          results[i].error = e.what();
        }
      });
    }
    for (std::thread& t : probes) t.join();
  }
  std::vector<std::string> absent;
  for (size_t i = 0; i < addresses.size(); ++i) {
    if (static_cast<int>(i) == self) continue;
    const std::string name = "worker " + std::to_string(i) + " (" + addresses[i] + ")";
    if (std::string clause = describe_unanswered(name, results[i], window); !clause.empty())
      absent.push_back(std::move(clause));
  }
  return absent;
}

}  // namespace kx::workers
