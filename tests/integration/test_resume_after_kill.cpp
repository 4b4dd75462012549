// A fit killed with SIGKILL at three random moments (one of them while a checkpoint is being written)
// and resumed each time ends with the same weights, bit for bit, as the fit that was never stopped.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kData = "/usr/share/datasets/fashion-mnist";

pid_t start_worker(const std::string& ckpt, const std::string& out, const std::string& precision) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl(KX_RESUME_WORKER, KX_RESUME_WORKER, kData.c_str(), ckpt.c_str(), out.c_str(), precision.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits for the worker; true when it was killed by SIGKILL, false when it ran to the end (status 0).
bool finish(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGKILL;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker failed, status " << status;
  return false;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Kills the worker at a moment chosen by the checkpoints it writes: when the n-th checkpoint file of
// this run appears, either as its temporary file is created (in the middle of the write) or `delay`
// after it was renamed into place (between writes). Returns whether the worker died of that kill.
bool kill_at(pid_t pid, const std::string& dir, int nth, bool mid_write, std::chrono::microseconds delay) {
  const int fd = inotify_init1(IN_CLOEXEC);
  const int wd = inotify_add_watch(fd, dir.c_str(), mid_write ? IN_CREATE : IN_MOVED_TO);
  EXPECT_GE(wd, 0);
  int seen = 0;
  alignas(inotify_event) char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (seen < nth && poll(&p, 1, 120000) > 0) {
    const ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t at = 0; at < n && seen < nth;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      const std::string name = e->len ? e->name : "";
      const bool tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
      if (tmp == mid_write) ++seen;
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  close(fd);
  if (seen == nth) {
    std::this_thread::sleep_for(delay);
    kill(pid, SIGKILL);
  }
  return finish(pid);
}

void kill_and_resume(const std::string& precision) {
  const fs::path work = fs::temp_directory_path() / ("kx-resume-" + precision + "-" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work / "ckpt");
  const std::string w1 = (work / "w1.bin").string(), w2 = (work / "w2.bin").string();
  const std::string ckpt = (work / "ckpt").string();

  const auto t0 = Clock::now();  // the uninterrupted fit
  ASSERT_FALSE(finish(start_worker("-", w1, precision)));
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  const unsigned seed = std::random_device{}();
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> nth(1, 4);
  std::uniform_int_distribution<int> micros(0, 30000);
  std::printf("uninterrupted fit: %.2f s; kill moments drawn with seed %u\n", run_seconds, seed);
  int kills = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const bool mid_write = attempt == 1;
    const int n = nth(gen);
    const std::chrono::microseconds delay(mid_write ? 0 : micros(gen));
    const bool killed = kill_at(start_worker(ckpt, w2, precision), ckpt, n, mid_write, delay);
    std::printf("kill %d: %s checkpoint %d of the run%s: %s\n", attempt + 1, mid_write ? "while writing" : "after", n,
                mid_write ? "" : (" + " + std::to_string(delay.count()) + " us").c_str(),
                killed ? "killed" : "had already finished");
    kills += killed;
  }
  EXPECT_EQ(kills, 3);
  int before = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) before += e.path().extension() == ".kx";
  EXPECT_GE(before, 1) << "no checkpoint was written before the kills: nothing was resumed";
  ASSERT_FALSE(finish(start_worker(ckpt, w2, precision)));  // resumes and runs to the end
  const std::vector<char> a = read_all(w1), b = read_all(w2);
  ASSERT_EQ(a.size(), 269322u * sizeof(float));
  EXPECT_TRUE(a == b) << "the resumed fit ended with other weights";
  int files = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) files += e.path().extension() == ".kx";
  EXPECT_LE(files, 3);  // keep_last
  fs::remove_all(work);
}

TEST(ResumeAfterKill, WeightsAreBitwiseEqualToAnUninterruptedFit) {
  if (!fs::exists(kData + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist missing";
  kill_and_resume("float32");
}

// mixed_float16: the rounding, the skipped steps and the loss scale resume bit for bit too.
TEST(ResumeAfterKill, MixedFloat16WeightsAreBitwiseEqualToAnUninterruptedFit) {
  if (!fs::exists(kData + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist missing";
  kill_and_resume("fp16");
}

}  // namespace
