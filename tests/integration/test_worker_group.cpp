// The cross-process engine with real processes on loopback: N copies of kx_worker_group_worker started
// with TF_CONFIG (and once by mpirun), then sums, broadcasts, barriers and all-gathers checked, results
// compared bit for bit across workers and across runs, and workers killed or stopped mid-run.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

#include "processes.hpp"

namespace {

using namespace kx::test_processes;

class WorkerGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_module()) GTEST_SKIP() << "no multi-worker module (" << KX_WORKERS_MODULE_PATH << "): Gloo not found";
    dir_ = fs::temp_directory_path() /
           ("kx-workers-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : pids_) kill_child(pid);  // whatever is left of a failed test
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }

  // Starts one worker per TF_CONFIG; its log is dir/<tag><index>.log.
  void start_tf_config_workers(const std::string& scenario, const fs::path& out, const std::vector<std::string>& addresses,
                               int timeout_ms, const std::string& tag = "worker") {
    for (size_t i = 0; i < addresses.size(); ++i)
      pids_.push_back(spawn({KX_WORKER_PROGRAM, scenario, out.string(), std::to_string(timeout_ms)},
                            {"TF_CONFIG=" + tf_config(addresses, "worker", static_cast<int>(i))},
                            dir_ / (tag + std::to_string(i) + ".log")));
  }

  // Waits for every worker; each must exit 0 (else its log is shown).
  void expect_all_succeed(const std::string& tag = "worker", milliseconds limit = milliseconds(120000)) {
    const Clock::time_point deadline = Clock::now() + limit;
    for (size_t i = 0; i < pids_.size(); ++i) {
      const std::optional<int> code = wait_exit(pids_[i], deadline);
      const std::string log = read_file(dir_ / (tag + std::to_string(i) + ".log"));
      EXPECT_EQ(code, std::optional<int>(0)) << tag << " " << i << " log:\n" << log;
      if (code) pids_[i] = -1;
    }
    std::erase(pids_, -1);
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
};

// Every worker's result files equal, byte for byte, to worker 0's (and to `other`'s when given).
void expect_same_results(const fs::path& out, int workers, const fs::path& other = {}) {
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.find("-rank0.bin") == std::string::npos) continue;
    const std::string reference = read_file(entry.path());
    for (int r = 1; r < workers; ++r) {
      std::string peer = name;
      peer.replace(peer.find("-rank0"), 6, "-rank" + std::to_string(r));
      EXPECT_EQ(read_file(out / peer), reference) << peer << " differs from " << name;
    }
    if (!other.empty()) {
      EXPECT_EQ(read_file(other / name), reference) << name << " differs between runs";
    }
    ++compared;
  }
  EXPECT_EQ(compared, 10);  // f32 and f64 for 5 sizes
}

TEST_F(WorkerGroupTest, ThreeWorkersSumBroadcastBarrierAndGatherBitwiseAcrossWorkersAndRuns) {
  const fs::path first = dir_ / "run1", second = dir_ / "run2";
  for (const fs::path& out : {first, second}) {
    fs::create_directories(out);
    start_tf_config_workers("sums", out, loopback_addresses(3), 30000, out.filename().string() + "-worker");
    expect_all_succeed(out.filename().string() + "-worker");
  }
  expect_same_results(first, 3);
  expect_same_results(second, 3, first);
}

TEST_F(WorkerGroupTest, ChiefTaskIsWorkerZero) {
  const std::vector<std::string> chief = loopback_addresses(1), workers = loopback_addresses(1);
  pids_.push_back(spawn({KX_WORKER_PROGRAM, "sums", dir_.string(), "30000"},
                        {"TF_CONFIG=" + tf_config(workers, "worker", 0, chief)}, dir_ / "worker1.log"));
  pids_.insert(pids_.begin(), spawn({KX_WORKER_PROGRAM, "sums", dir_.string(), "30000"},
                                    {"TF_CONFIG=" + tf_config(workers, "chief", 0, chief)}, dir_ / "worker0.log"));
  expect_all_succeed();
  EXPECT_NE(read_file(dir_ / "worker0.log").find("joined as worker 0 (" + chief[0] + ") of 2"), std::string::npos);
  EXPECT_NE(read_file(dir_ / "worker1.log").find("joined as worker 1 (" + workers[0] + ") of 2"), std::string::npos);
  expect_same_results(dir_, 2);
}

TEST_F(WorkerGroupTest, MismatchedCallsFailOnEveryWorkerAndTheGroupGoesOn) {
  start_tf_config_workers("mismatch", dir_, loopback_addresses(2), 10000);
  expect_all_succeed();
}

TEST_F(WorkerGroupTest, AWorkerThatNeverStartsIsNamedWhenTheJoinTimesOut) {
  const std::vector<std::string> addresses = loopback_addresses(2);
  pids_.push_back(spawn({KX_WORKER_PROGRAM, "join", dir_.string(), "1500"},
                        {"TF_CONFIG=" + tf_config(addresses, "worker", 0)}, dir_ / "worker0.log"));
  const Clock::time_point start = Clock::now();
  const std::optional<int> code = wait_exit(pids_[0], Clock::now() + milliseconds(20000));
  const std::string log = read_file(dir_ / "worker0.log");
  ASSERT_EQ(code, std::optional<int>(3)) << log;
  pids_.clear();
  EXPECT_LT(Clock::now() - start, milliseconds(1500 + 5000));
  EXPECT_NE(log.find("status=-9"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 1 (" + addresses[1] + ") has not joined"), std::string::npos) << log;
}

TEST_F(WorkerGroupTest, WorkersStartedWithDifferentClustersAreRefused) {
  std::vector<std::string> addresses = loopback_addresses(3);
  const std::vector<std::string> two(addresses.begin(), addresses.begin() + 2);
  pids_.push_back(spawn({KX_WORKER_PROGRAM, "join", dir_.string(), "10000"},
                        {"TF_CONFIG=" + tf_config(two, "worker", 0)}, dir_ / "worker0.log"));
  pids_.push_back(spawn({KX_WORKER_PROGRAM, "join", dir_.string(), "10000"},
                        {"TF_CONFIG=" + tf_config(addresses, "worker", 1)}, dir_ / "worker1.log"));
  const Clock::time_point deadline = Clock::now() + milliseconds(20000);
  for (size_t i = 0; i < pids_.size(); ++i) {
    const std::optional<int> code = wait_exit(pids_[i], deadline);
    const std::string log = read_file(dir_ / ("worker" + std::to_string(i) + ".log"));
    ASSERT_EQ(code, std::optional<int>(3)) << log;
    pids_[i] = -1;
    EXPECT_NE(log.find("status=-1"), std::string::npos) << log;  // Status::InvalidArgument
    EXPECT_NE(log.find("was started with another cluster"), std::string::npos) << log;
  }
  pids_.clear();
}

// Three workers all-reduce in a loop; `victim` is killed (SIGKILL) or stopped (SIGSTOP) once every
// worker has taken a few steps. Every survivor must fail with Status::Comm within the timeout + 5 s,
// naming the victim.
void expect_survivors_name(WorkerGroupTest& test, const fs::path& dir, std::vector<pid_t>& pids, int signal,
                           const std::vector<std::string>& addresses, int victim, const char* how) {
  const int timeout_ms = 2000;
  const Clock::time_point ready_by = Clock::now() + milliseconds(30000);
  for (size_t i = 0; i < pids.size(); ++i)
    while (read_file(dir / ("worker" + std::to_string(i) + ".log")).find("step 5\n") == std::string::npos) {
      ASSERT_LT(Clock::now(), ready_by) << "worker " << i << " did not start stepping:\n"
                                        << read_file(dir / ("worker" + std::to_string(i) + ".log"));
      std::this_thread::sleep_for(milliseconds(10));
    }
  ASSERT_GT(pids[victim], 0);
  ASSERT_EQ(kill(pids[victim], signal), 0);
  const Clock::time_point struck = Clock::now();
  for (size_t i = 0; i < pids.size(); ++i) {
    if (static_cast<int>(i) == victim) continue;
    const std::optional<int> code = wait_exit(pids[i], struck + milliseconds(timeout_ms + 5000));
    const std::string log = read_file(dir / ("worker" + std::to_string(i) + ".log"));
    ASSERT_TRUE(code.has_value()) << "survivor " << i << " still running " << timeout_ms + 5000 << " ms after the "
                                  << how << ":\n" << log;
    pids[i] = -1;
    EXPECT_EQ(*code, 3) << log;
    EXPECT_NE(log.find("status=-9"), std::string::npos) << log;  // Status::Comm
    EXPECT_NE(log.find("worker " + std::to_string(victim) + " (" + addresses[victim] + ") "), std::string::npos) << log;
    std::printf("survivor %zu, %lld ms after the %s: %s", i,
                static_cast<long long>(std::chrono::duration_cast<milliseconds>(Clock::now() - struck).count()), how,
                log.substr(log.find("error")).c_str());
  }
  (void)test;
}

TEST_F(WorkerGroupTest, AKilledWorkerGivesCommOnEverySurvivorNamingIt) {
  const std::vector<std::string> addresses = loopback_addresses(3);
  start_tf_config_workers("steps", dir_, addresses, 2000);
  expect_survivors_name(*this, dir_, pids_, SIGKILL, addresses, 1, "SIGKILL");
}

TEST_F(WorkerGroupTest, AKilledChiefGivesCommOnEverySurvivorNamingIt) {
  const std::vector<std::string> addresses = loopback_addresses(3);
  start_tf_config_workers("steps", dir_, addresses, 2000);
  expect_survivors_name(*this, dir_, pids_, SIGKILL, addresses, 0, "SIGKILL");
}

TEST_F(WorkerGroupTest, AStoppedWorkerGivesCommOnEverySurvivorNamingIt) {
  const std::vector<std::string> addresses = loopback_addresses(3);
  start_tf_config_workers("steps", dir_, addresses, 2000);
  expect_survivors_name(*this, dir_, pids_, SIGSTOP, addresses, 2, "SIGSTOP");
  const std::string log = read_file(dir_ / "worker0.log");
  EXPECT_NE(log.find("does not answer"), std::string::npos) << log;
}

TEST_F(WorkerGroupTest, MpirunLaunchSumsAreBitwiseIdenticalAcrossWorkers) {
  if (std::string(KX_MPIRUN).empty()) GTEST_SKIP() << "no mpirun found at configure time";
  const std::string asan_options = asan_options_without_leak_check();  // the TF_CONFIG launches keep the check
  // Under mpirun Open MPI carries the sums: 2 and 3 workers (parts of uneven sizes).
  for (const int workers : {2, 3}) {
    const fs::path out = dir_ / ("np" + std::to_string(workers));
    fs::create_directories(out);
    const std::string np = std::to_string(workers);
    pids_.push_back(spawn({KX_MPIRUN, "--oversubscribe", "-np", np, KX_WORKER_PROGRAM, "sums", out.string(), "30000"},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", asan_options}, out / "worker0.log"));
    const std::optional<int> code = wait_exit(pids_[0], Clock::now() + milliseconds(120000));
    const std::string log = read_file(out / "worker0.log");
    ASSERT_TRUE(code.has_value()) << log;
    pids_.clear();
    if (log.find("built without MPI") != std::string::npos) GTEST_SKIP() << log;
    EXPECT_EQ(*code, 0) << log;
    EXPECT_NE(log.find("joined as worker " + std::to_string(workers - 1)), std::string::npos) << log;
    expect_same_results(out, workers);
  }
}

// Without the engine module, a group of more than one worker is refused with the reason.
TEST(WorkerGroupWithoutModule, IsUnsupportedSayingWhy) {
  const fs::path log = fs::temp_directory_path() / ("kx-workers-nomodule-" + std::to_string(getpid()) + ".log");
  std::vector<std::string> args = {KX_WORKER_PROGRAM, "join", fs::temp_directory_path().string(), "2000"};
  const pid_t pid = spawn(args, {"TF_CONFIG=" + tf_config(loopback_addresses(2), "worker", 0),
                                 "KX_WORKERS_MODULE=/nonexistent/libkx_workers.so"}, log);
  const std::optional<int> code = wait_exit(pid, Clock::now() + milliseconds(20000));
  const std::string text = read_file(log);
  fs::remove(log);
  ASSERT_EQ(code, std::optional<int>(3)) << text;
  EXPECT_NE(text.find("status=-7"), std::string::npos) << text;  // Status::Unsupported
  EXPECT_NE(text.find("/nonexistent/libkx_workers.so"), std::string::npos) << text;
}

}  // namespace
