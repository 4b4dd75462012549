// MultiWorkerMirroredStrategy's cost on one machine: the Fashion-MNIST MLP at global batch 256 and the
// CNN at 64, as 1 process with 2 threads against 2 worker processes with 1 thread each (started by
// this program). Prints ms/step of each and the multi-worker's extra time.
//
// The job runs twice: started by TF_CONFIG (Gloo over TCP) and by mpirun (Open MPI carries the tensors).
//
//   bench_multi_worker [--steps N] [--data DIR]
#include <unistd.h>

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

int run_worker(const std::string& dir, int64_t steps) {
  Strategy s = Strategy::multi_worker({"cpu"});
  s.set_num_threads(1);
  for (const Case& c : kCases) {
    const double ms = time_case(s, c, dir, steps);
    if (s.worker_index() == 0) std::printf("WORKERS %s %.4f\n", c.name, ms);
  }
  return 0;
}

enum class Launcher { TfConfig, Mpirun };

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

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int64_t steps = 100;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--worker") worker = true;
    else if (a == "--steps" && i + 1 < argc) steps = std::max<int64_t>(1, std::atoll(argv[++i]));
    else if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--data DIR]\n", argv[0]);
      return 2;
    }
  }
  // The bench links the SDK statically: point it at the engine module built beside it.
  if (!std::getenv("KX_WORKERS_MODULE")) setenv("KX_WORKERS_MODULE", KX_WORKERS_MODULE_PATH, 0);
  try {
    if (worker) return run_worker(dir, steps);
    std::printf("kx multi-worker scaling: 1 process x 2 threads against 2 workers x 1 thread, %lld steps\n",
                static_cast<long long>(steps));
    Strategy one = Strategy::mirrored({"cpu"});
    one.set_num_threads(2);
    std::vector<double> single;
    for (const Case& c : kCases) single.push_back(time_case(one, c, dir, steps));
    const std::vector<double> tf_config = run_job(Launcher::TfConfig, dir, steps);
    const std::vector<double> mpirun = run_job(Launcher::Mpirun, dir, steps);
    if (tf_config.empty()) {
      std::fprintf(stderr, "bench_multi_worker: the 2-worker job failed (its messages are above)\n");
      return 1;
    }
    for (size_t i = 0; i < 2; ++i) {
      std::printf("%s batch %lld: 1 process x 2 threads %.3f ms/step; 2 workers x 1 thread: TF_CONFIG (Gloo, TCP) %.3f "
                  "ms/step (%+.1f %%)",
                  kCases[i].name, static_cast<long long>(kCases[i].batch), single[i], tf_config[i],
                  100.0 * (tf_config[i] / single[i] - 1));
      if (mpirun.empty()) std::printf(", mpirun: not run (no mpirun, or the job failed)\n");
      else std::printf(", mpirun (Open MPI) %.3f ms/step (%+.1f %%)\n", mpirun[i], 100.0 * (mpirun[i] / single[i] - 1));
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_multi_worker: %s\n", e.what());
    return 1;
  }
}
