// ParameterServerStrategy against MultiWorkerMirroredStrategy on one machine: the Fashion-MNIST MLP
// trained by 2 worker processes (1 thread each, 32 samples a worker step), the parameter-server job
// with a chief and 1 ps beside them (TF_CONFIG on loopback, started by this program). Prints worker
// steps per second of each, then the same with one worker slowed 2x (a pause after each of its steps
// as long as a step): the mirrored job waits for it at every step, the parameter-server one does not.
//
//   bench_parameter_server [--steps N] [--data DIR]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "config/test_hooks.hpp"

namespace {

using namespace kx;
using Clock = std::chrono::steady_clock;

constexpr int64_t kWorkerBatch = 32;

Dataset mnist(const std::string& dir, int64_t batch) {
  Dataset d = Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  d.shuffle(d.num_samples(), 1);
  d.batch(batch, true);
  return d;
}

// One task of a job (TF_CONFIG in the environment). Prints "RESULT <worker steps> <seconds>" on the
// task that times the job: the chief (parameter server) or worker 0 (mirrored).
int run_task(const std::string& kind, const std::string& dir, int64_t steps, int delay_ms) {
  const bool ps = kind == "ps";
  Strategy s = ps ? Strategy::parameter_server({"cpu"}) : Strategy::multi_worker({"cpu"});
  s.set_num_threads(1);
  if (ps && s.parameter_server_rank() > s.parameter_server_workers()) {
    s.serve();
    return 0;
  }
  // Mirrored: one step is a 32-sample step on each of the 2 workers; parameter server: one worker step.
  Dataset d = mnist(dir, ps ? kWorkerBatch : 2 * kWorkerBatch);
  Model m = bench::fashion_mlp(s);
  // A parameter-server worker given a delay pauses after each of its steps (kx's internal test hook).
  if (ps) config::test_hooks().ps_step_delay = std::chrono::milliseconds(delay_ms);
  Callbacks slow;  // the mirrored chief (worker 0) pauses after each step; everyone waits for it
  if (!ps && delay_ms > 0)
    slow.add([delay_ms](const Event& e) {
      if (e.kind == EventKind::BatchEnd) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      return false;
    }, false);
  FitOptions o;
  o.steps_per_epoch = ps ? steps : steps / 2;
  const Clock::time_point t0 = Clock::now();
  m.fit(d, o, &slow, nullptr);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const bool timer = ps ? s.parameter_server_rank() == 0 : s.worker_index() == 0;
  if (timer) std::printf("RESULT %lld %.6f\n", static_cast<long long>(ps ? steps : 2 * (steps / 2)), seconds);
  return 0;
}

std::string addresses(int base, int n) {
  std::string list = "[";
  for (int i = 0; i < n; ++i) list += (i ? ", \"127.0.0.1:" : "\"127.0.0.1:") + std::to_string(base + i) + "\"";
  return list + "]";
}

// Runs a job of this program's tasks; returns worker steps per second (negative when it failed).
double run_job(const char* self, const std::string& kind, const std::string& dir, int64_t steps, int delay_ms, int base) {
  struct Task {
    std::string type;
    int index;
  };
  std::vector<Task> tasks;
  std::string cluster;
  if (kind == "ps") {
    tasks = {{"chief", 0}, {"worker", 0}, {"worker", 1}, {"ps", 0}};
    cluster = "\"chief\": " + addresses(base, 1) + ", \"worker\": " + addresses(base + 1, 2) + ", \"ps\": " + addresses(base + 3, 1);
  } else {
    tasks = {{"worker", 0}, {"worker", 1}};
    cluster = "\"worker\": " + addresses(base, 2);
  }
  const std::string out = "/tmp/kx-bench-ps-" + std::to_string(getpid()) + ".txt";
  std::vector<pid_t> pids;
  std::fflush(stdout);  // nothing of ours left in the buffer for the children to print again
  for (const Task& t : tasks) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string tf = "{\"cluster\": {" + cluster + "}, \"task\": {\"type\": \"" + t.type + "\", \"index\": " +
                             std::to_string(t.index) + "}}";
      setenv("TF_CONFIG", tf.c_str(), 1);
      // The parameter-server job's slow worker is worker 1 (the mirrored one slows its chief by a callback).
      const bool slowed = kind != "ps" || (t.type == "worker" && t.index == 1);
      if (t.type == "chief" || (kind != "ps" && t.index == 0)) {
        if (!std::freopen(out.c_str(), "w", stdout)) _exit(126);
      }
      const std::string s = std::to_string(steps), d = std::to_string(slowed ? delay_ms : 0);
      execl("/proc/self/exe", self, "--task", kind.c_str(), "--steps", s.c_str(), "--data", dir.c_str(), "--delay-ms",
            d.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream f(out);
  std::string word;
  double done = 0, seconds = 0;
  f >> word >> done >> seconds;
  std::remove(out.c_str());
  if (failed || word != "RESULT" || seconds <= 0) return -1;
  return done / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/usr/share/datasets/fashion-mnist", task;
  int64_t steps = 1000;
  int delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--task" && i + 1 < argc) task = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps = std::max<int64_t>(2, std::atoll(argv[++i]));
    else if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--delay-ms" && i + 1 < argc) delay_ms = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--data DIR]\n", argv[0]);
      return 2;
    }
  }
  if (!std::getenv("KX_WORKERS_MODULE")) setenv("KX_WORKERS_MODULE", KX_WORKERS_MODULE_PATH, 0);
  try {
    if (!task.empty()) return run_task(task, dir, steps, delay_ms);
    std::printf("kx parameter server against multi-worker mirrored: MLP, 2 workers x 1 thread, %lld worker steps of "
                "%lld samples\n", static_cast<long long>(steps), static_cast<long long>(kWorkerBatch));
    const int base = 20000 + getpid() % 20000;
    const double mirrored = run_job(argv[0], "mirrored", dir, steps, 0, base);
    const double ps = run_job(argv[0], "ps", dir, steps, 0, base + 10);
    if (mirrored <= 0 || ps <= 0) {
      std::fprintf(stderr, "bench_parameter_server: a job failed (its messages are above)\n");
      return 1;
    }
    // Slowed 2x: after each of one worker's steps, a pause as long as that job's worker step (2 workers
    // at `rate` worker steps/s: one step of one worker lasts 2 / rate s).
    const auto step_ms = [](double rate) { return std::max(1, static_cast<int>(std::lround(2000.0 / rate))); };
    const int delay_mirrored = step_ms(mirrored), delay_ps = step_ms(ps);
    const double mirrored_slow = run_job(argv[0], "mirrored", dir, steps, delay_mirrored, base + 20);
    const double ps_slow = run_job(argv[0], "ps", dir, steps, delay_ps, base + 30);
    if (mirrored_slow <= 0 || ps_slow <= 0) {
      std::fprintf(stderr, "bench_parameter_server: a slowed job failed (its messages are above)\n");
      return 1;
    }
    std::printf("both workers at full speed: mirrored %.1f worker steps/s, parameter server %.1f (%.2fx)\n", mirrored,
                ps, ps / mirrored);
    std::printf("one worker slowed 2x (a pause of %d / %d ms after each of its steps): mirrored %.1f worker steps/s "
                "(%.2fx its full speed), parameter server %.1f (%.2fx its full speed)\n",
                delay_mirrored, delay_ps, mirrored_slow, mirrored_slow / mirrored, ps_slow, ps_slow / ps);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_parameter_server: %s\n", e.what());
    return 1;
  }
}
