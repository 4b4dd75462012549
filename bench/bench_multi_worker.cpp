// MultiWorkerMirroredStrategy's cost on one machine: the Fashion-MNIST MLP at global batch 256 and the
// CNN at 64, as 1 process with 2 threads against 2 worker processes with 1 thread each (started by
// this program). Prints ms/step of each and the multi-worker's extra time.
//
// The job runs twice: started by TF_CONFIG (shared memory on one host; Gloo over TCP with
// KX_SHARED_MEMORY=0) and by mpirun (Open MPI carries the tensors).
//
//   bench_multi_worker [--steps N] [--rounds N] [--data DIR]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "worker_launch.hpp"

namespace {

using namespace kx;

struct Case {
  const char* name;
  int64_t batch;
};
constexpr Case kCases[] = {{"MLP", 256}, {"CNN", 64}};

// Fashion-MNIST's training images (the CNN reads them as 28x28x1: only the element count must match).
Dataset data_for(const std::string& dir, int64_t batch) {
  Dataset d = Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  d.shuffle(d.num_samples(), 1);
  d.batch(batch, true);
  return d;
}

// One timing on `strategy`; the bench's own process or one worker of the job.
double time_case(const Strategy& strategy, const Case& c, const std::string& dir, int64_t steps) {
  const bool cnn = std::string(c.name) == "CNN";
  Dataset d = data_for(dir, c.batch);
  Model m = cnn ? bench::fashion_cnn(strategy) : bench::fashion_mlp(strategy);
  return bench::ms_per_step(m, d, steps, 10);
}

// Times every case on `s`, each global batch split `parts` ways, and prints the figures when `report`.
// A worker of the job: the multi-worker strategy (parts 1: it splits the batch itself). The floor: the
// same two processes with nothing between them, each training half the global batch on its own copy
// of the model; what the job costs beyond this is the engine's.
int time_cases(const Strategy& s, int64_t parts, bool report, const std::string& dir, int64_t steps) {
  for (const Case& c : kCases) {
    const double ms = time_case(s, Case{c.name, c.batch / parts}, dir, steps);
    if (report) std::printf("WORKERS %s %.4f\n", c.name, ms);
  }
  return 0;
}

enum class Launcher { TfConfig, Mpirun, Independent };

// Runs the 2-worker job (two copies of this program) and returns worker 0's ms/step per case, read
// back through a pipe; empty when the job failed or cannot be launched.
std::vector<double> run_job(Launcher launcher, const std::string& dir, int64_t steps) {
  if (launcher == Launcher::Mpirun && std::string(KX_MPIRUN).empty()) return {};
  const std::vector<std::string> program{bench::own_path(), "--worker", "--steps", std::to_string(steps), "--data", dir};
  const std::vector<std::string> addresses{"127.0.0.1:" + std::to_string(20000 + getpid() % 20000),
                                           "127.0.0.1:" + std::to_string(20001 + getpid() % 20000)};
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::vector<pid_t> children;
  if (launcher == Launcher::Mpirun) {
    children.push_back(bench::spawn(bench::under_mpirun(KX_MPIRUN, 2, program), bench::mpirun_environment(), fds[1]));
  } else if (launcher == Launcher::Independent) {
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> alone = program;
      alone.push_back(i == 0 ? "--alone-report" : "--alone");
      children.push_back(bench::spawn(alone, {}, fds[1]));
    }
  } else {
    for (int i = 0; i < 2; ++i)
      children.push_back(bench::spawn(program, {"TF_CONFIG=" + bench::worker_tf_config(addresses, i)}, fds[1]));
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char line[256];
  std::vector<double> ms(2, -1);
  while (in && std::fgets(line, sizeof line, in)) {
    char name[16];
    double value = 0;
    if (std::sscanf(line, "WORKERS %15s %lf", name, &value) == 2) ms[std::string(name) == "CNN" ? 1 : 0] = value;
  }
  if (in) std::fclose(in);
  if (!bench::wait_all(children) || ms[0] < 0 || ms[1] < 0) return {};
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int64_t steps = 100;
  int rounds = 3;
  bool worker = false;
  int alone = 0;  // 1: an independent process, 2: one that reports
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--worker") worker = true;
    else if (a == "--alone") alone = 1;
    else if (a == "--alone-report") alone = 2;
    else if (a == "--steps" && i + 1 < argc) steps = std::max<int64_t>(1, std::atoll(argv[++i]));
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--rounds N] [--data DIR]\n", argv[0]);
      return 2;
    }
  }
  // The bench links the SDK statically: point it at the engine module built beside it.
  if (!std::getenv("KX_WORKERS_MODULE")) setenv("KX_WORKERS_MODULE", KX_WORKERS_MODULE_PATH, 0);
  try {
    if (alone || worker) {
      Strategy s = alone ? Strategy::mirrored({"cpu"}) : Strategy::multi_worker({"cpu"});
      s.set_num_threads(1);
      return time_cases(s, alone ? 2 : 1, alone ? alone == 2 : s.worker_index() == 0, dir, steps);
    }
    std::printf("kx multi-worker scaling: 1 process x 2 threads against 2 workers x 1 thread, %lld steps, median of "
                "%d rounds (each round times all three, so a slow spell of the machine falls on all of them)\n",
                static_cast<long long>(steps), rounds);
    Strategy one = Strategy::mirrored({"cpu"});
    one.set_num_threads(2);
    // [case][round]
    std::vector<std::vector<double>> single(2), independent(2), tf_config(2), mpirun(2);
    bool mpirun_ran = true;
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < 2; ++i) single[i].push_back(time_case(one, kCases[i], dir, steps));
      const std::vector<double> floor = run_job(Launcher::Independent, dir, steps);
      const std::vector<double> tf = run_job(Launcher::TfConfig, dir, steps);
      if (tf.empty()) {
        std::fprintf(stderr, "bench_multi_worker: the 2-worker job failed (its messages are above)\n");
        return 1;
      }
      const std::vector<double> mpi = run_job(Launcher::Mpirun, dir, steps);
      mpirun_ran = mpirun_ran && !mpi.empty();
      for (size_t i = 0; i < 2; ++i) {
        independent[i].push_back(floor.empty() ? -1 : floor[i]);
        tf_config[i].push_back(tf[i]);
        if (!mpi.empty()) mpirun[i].push_back(mpi[i]);
      }
      std::printf("  round %d: MLP %.3f / %.3f / %.3f / %s ms, CNN %.3f / %.3f / %.3f / %s ms (1 process / 2 "
                  "independent processes / TF_CONFIG / mpirun)\n",
                  round + 1, single[0].back(), independent[0].back(), tf[0],
                  mpi.empty() ? "-" : std::to_string(mpi[0]).substr(0, 5).c_str(), single[1].back(),
                  independent[1].back(), tf[1], mpi.empty() ? "-" : std::to_string(mpi[1]).substr(0, 5).c_str());
    }
    for (size_t i = 0; i < 2; ++i) {
      const double base = median(single[i]), alone = median(independent[i]), tf = median(tf_config[i]),
                   mpi = median(mpirun[i]);
      const char* shm = std::getenv("KX_SHARED_MEMORY");
      const bool over_tcp = shm && (std::string(shm) == "0" || std::string(shm) == "off");
      std::printf("%s batch %lld: 1 process x 2 threads %.3f ms/step; 2 independent 1-thread processes on half the "
                  "batch, nothing shared (the floor) %.3f ms/step (%+.1f %%); 2 workers x 1 thread: TF_CONFIG (%s) "
                  "%.3f ms/step (%+.1f %%)",
                  kCases[i].name, static_cast<long long>(kCases[i].batch), base, alone, 100.0 * (alone / base - 1),
                  over_tcp ? "Gloo, TCP: KX_SHARED_MEMORY=0" : "shared memory", tf, 100.0 * (tf / base - 1));
      if (!mpirun_ran) std::printf(", mpirun: not run (no mpirun, or the job failed)\n");
      else std::printf(", mpirun (Open MPI, shared memory) %.3f ms/step (%+.1f %%)\n", mpi, 100.0 * (mpi / base - 1));
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_multi_worker: %s\n", e.what());
    return 1;
  }
}
