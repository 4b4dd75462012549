// One task of the point-to-point test (test_cluster_peers.cpp), started with TF_CONFIG (a chief, workers
// and one ps). The ps answers every other task's requests (a number, doubled) from a thread per task
// until that task says goodbye or fails; the others send `count` requests, `pause_ms` apart.
//   kx_peers_task <count> <pause_ms> <timeout_ms>
// Exit: 0 done; 1 a wrong answer or error; 3 KX_E_COMM (the message on stderr).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "distribute/cluster_peers.hpp"
#include "kx/error.hpp"

using kx::distribute::ClusterPeers;

namespace {

constexpr uint32_t kRequest = 1, kReply = 2;
constexpr int64_t kGoodbye = -1;

void serve(ClusterPeers& peers) {
  std::vector<std::thread> threads;
  std::vector<std::string> lines(static_cast<size_t>(peers.size()));
  for (int client = 0; client < peers.size(); ++client) {
    if (client == peers.rank()) continue;
    threads.emplace_back([&, client] {
      int64_t served = 0;
      try {
        for (;;) {
          int64_t v = 0;
          peers.recv(client, kRequest, &v, sizeof v, ClusterPeers::Wait::Idle);
          if (v == kGoodbye) break;
          v *= 2;
          peers.send(client, kReply, &v, sizeof v, ClusterPeers::Wait::Reply);
          ++served;
        }
        lines[static_cast<size_t>(client)] = peers.describe(client) + ": served " + std::to_string(served) + ", goodbye";
      } catch (const kx::Error& e) {
        lines[static_cast<size_t>(client)] = peers.describe(client) + ": served " + std::to_string(served) +
                                             ", then failed: " + "status " + std::to_string(static_cast<int>(e.status())) + ": " + e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& l : lines)
    if (!l.empty()) std::printf("%s\n", l.c_str());
}

int ask(ClusterPeers& peers, int server, int64_t count, int pause_ms) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = i;
    peers.send(server, kRequest, &v, sizeof v, ClusterPeers::Wait::Reply);
    peers.recv(server, kReply, &v, sizeof v, ClusterPeers::Wait::Reply);
    if (v != 2 * i) {
      std::fprintf(stderr, "request %lld: answer %lld\n", static_cast<long long>(i), static_cast<long long>(v));
      return 1;
    }
    if (i == 0) std::printf("first answer\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  int64_t bye = kGoodbye;
  peers.send(server, kRequest, &bye, sizeof bye, ClusterPeers::Wait::Reply);
  std::printf("done %lld\n", static_cast<long long>(count));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <count> <pause_ms> <timeout_ms>\n", argv[0]);
    return 2;
  }
  try {
    const auto spec = kx::distribute::ClusterSpec::from_environment();
    auto peers = ClusterPeers::join(spec, std::chrono::milliseconds(std::atoi(argv[3])));
    if (spec.task_type == "ps") {
      serve(*peers);
      return 0;
    }
    return ask(*peers, peers->size() - 1, std::atoll(argv[1]), std::atoi(argv[2]));
  } catch (const kx::Error& e) {
    std::fprintf(stderr, "status %d: %s\n", static_cast<int>(e.status()), e.what());
    return e.status() == kx::Status::Comm ? 3 : 1;
  }
}
