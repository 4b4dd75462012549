// The cross-process engine's all-reduce bandwidth: N worker processes on loopback (started by this
// program with TF_CONFIG, default 2, then under mpirun when there is one) sum float32 buffers of 1 MiB and 64 MiB; worker 0 prints the
// median time per call, the algorithm bandwidth (buffer bytes / time) and the bus bandwidth (what each
// worker moves, 2 (N-1)/N of the buffer, / time), and the latency of a barrier (the per-call
// agreement alone, which every operation starts with).
//
//   bench_allreduce [--workers N] [--rounds N]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "distribute/cluster_spec.hpp"
#include "worker_launch.hpp"
#include "distribute/worker_group.hpp"
#include "kx/error.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using kx::distribute::WorkerGroup;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `call`, median over `rounds` timed calls after two untimed ones.
template <typename Call>
double seconds_per_call(WorkerGroup& group, int rounds, Call&& call) {
  call();
  call();
  std::vector<double> times;
  for (int i = 0; i < rounds; ++i) {
    group.barrier();  // start together, so that a call's time is its own, not a late peer's
    const Clock::time_point t0 = Clock::now();
    call();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(times);
}

int run_worker(int rounds) {
  const std::unique_ptr<WorkerGroup> group = WorkerGroup::join(kx::distribute::ClusterSpec::from_environment());
  const int n = group->size();
  const double barrier_s = seconds_per_call(*group, rounds * 10, [&] { group->barrier(); });
  if (group->rank() == 0) {
    const bool mpi = std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
    std::printf("kx multi-worker engine, %d workers on one machine, %s\n", n,
                mpi ? "started by mpirun (Open MPI carries the tensors)" : "started by TF_CONFIG (Gloo over TCP loopback)");
    std::printf("  barrier (the agreement every call starts with): %.1f us\n", barrier_s * 1e6);
  }
  for (const size_t mib : {size_t{1}, size_t{64}}) {
    std::vector<float> data(mib * (1u << 20) / sizeof(float), 1.0f);
    const int calls = mib == 1 ? rounds * 10 : rounds;
    const double s = seconds_per_call(*group, calls, [&] { group->all_reduce_sum(data.data(), data.size()); });
    const double bytes = static_cast<double>(data.size() * sizeof(float));
    if (group->rank() == 0)
      std::printf("  all_reduce_sum float32 %3zu MiB: %8.3f ms  algorithm %6.2f GB/s  bus %6.2f GB/s  (median of %d)\n",
                  mib, s * 1e3, bytes / s / 1e9, bytes * 2.0 * (n - 1) / n / s / 1e9, calls);
  }
  group->barrier();
  return 0;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Runs `workers` copies of this program, started with TF_CONFIG on loopback, or by mpirun (when the
// build found one); 0 when they all succeeded (or there is no mpirun to try).
int launch(bool by_mpirun, int workers, int rounds) {
  const std::string self = kx::bench::own_path();
  const std::vector<std::string> program{self, "--worker", "--rounds", std::to_string(rounds)};
  if (by_mpirun) {
    if (std::string(KX_MPIRUN).empty()) return 0;
    const pid_t job = kx::bench::spawn(kx::bench::under_mpirun(KX_MPIRUN, workers, program), kx::bench::mpirun_environment());
    return kx::bench::wait_all({job}) ? 0 : 1;
  }
  std::vector<std::string> addresses;
  for (int i = 0; i < workers; ++i) addresses.push_back("127.0.0.1:" + std::to_string(free_port()));
  std::vector<pid_t> children;
  for (int i = 0; i < workers; ++i)
    children.push_back(kx::bench::spawn(program, {"TF_CONFIG=" + kx::bench::worker_tf_config(addresses, i)}));
  return kx::bench::wait_all(children) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int workers = 2, rounds = 20;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--worker") worker = true;
    else if (a == "--workers" && i + 1 < argc) workers = std::atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--workers N] [--rounds N]\n", argv[0]);
      return 2;
    }
  }
  try {
    if (worker) return run_worker(rounds);
    if (!std::getenv("KX_WORKERS_MODULE")) setenv("KX_WORKERS_MODULE", KX_WORKERS_MODULE_PATH, 0);
    const int tcp = launch(false, std::max(2, workers), rounds);
    return launch(true, std::max(2, workers), rounds) | tcp;
  } catch (const kx::Error& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
