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

pid_t start_worker(const std::string& ckpt, const std::string& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl(KX_RESUME_WORKER, KX_RESUME_WORKER, kData.c_str(), ckpt.c_str(), out.c_str(), static_cast<char*>(nullptr));
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

// Kills the worker as soon as a checkpoint's temporary file appears: in the middle of a write.
bool kill_mid_write(pid_t pid, const std::string& dir) {
  const int fd = inotify_init1(IN_CLOEXEC);
  const int wd = inotify_add_watch(fd, dir.c_str(), IN_CREATE);
  EXPECT_GE(wd, 0);
  bool killed = false;
  alignas(inotify_event) char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (!killed && poll(&p, 1, 60000) > 0) {
    const ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      const std::string name = e->len ? e->name : "";
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 && !killed) {
        kill(pid, SIGKILL);
        killed = true;
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  close(fd);
  return finish(pid) && killed;
}

TEST(ResumeAfterKill, WeightsAreBitwiseEqualToAnUninterruptedFit) {
  if (!fs::exists(kData + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const fs::path work = fs::temp_directory_path() / ("kx-resume-" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work / "ckpt");
  const std::string w1 = (work / "w1.bin").string(), w2 = (work / "w2.bin").string();
  const std::string ckpt = (work / "ckpt").string();

  const auto t0 = Clock::now();
  ASSERT_FALSE(finish(start_worker("-", w1)));
  const double run_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  const unsigned seed = std::random_device{}();
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> moment(0.3, 0.6);
  std::printf("uninterrupted fit: %.2f s; kill moments drawn with seed %u\n", run_seconds, seed);
  int kills = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const pid_t pid = start_worker(ckpt, w2);
    if (attempt == 1) {
      kills += kill_mid_write(pid, ckpt);
      continue;
    }
    const double delay = moment(gen) * run_seconds;
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    kill(pid, SIGKILL);
    const bool killed = finish(pid);
    std::printf("kill %d after %.2f s: %s\n", attempt + 1, delay, killed ? "killed" : "had already finished");
    kills += killed;
  }
  EXPECT_EQ(kills, 3);
  int before = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) before += e.path().extension() == ".kx";
  EXPECT_GE(before, 1) << "no checkpoint was written before the kills: nothing was resumed";
  ASSERT_FALSE(finish(start_worker(ckpt, w2)));  // resumes and runs to the end
  const std::vector<char> a = read_all(w1), b = read_all(w2);
  ASSERT_EQ(a.size(), 269322u * sizeof(float));
  EXPECT_TRUE(a == b) << "the resumed fit ended with other weights";
  int files = 0;
  for (const auto& e : fs::directory_iterator(ckpt)) files += e.path().extension() == ".kx";
  EXPECT_LE(files, 3);  // keep_last
  fs::remove_all(work);
}

}  // namespace
