// Point-to-point messages between the tasks of a parameter-server cluster, with real processes on
// loopback (kx_peers_task, TF_CONFIG with a chief, two workers and a ps): every request answered in
// order; a worker killed mid-run costs the ps that worker only (it serves the others to the end); a ps
// killed is KX_E_COMM naming it on every other task within the timeout + 5 s.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "processes.hpp"

namespace {

using namespace kx::test_processes;

constexpr int kCommExit = 3;

class ClusterPeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_module()) GTEST_SKIP() << "no engine module (" << KX_WORKERS_MODULE_PATH << "): Gloo not found";
    dir_ = fs::temp_directory_path() /
           ("kx-peers-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : pids_) kill_child(pid);
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }
  // Starts the chief (task 0), two workers (1, 2) and the ps (3); `args[t]` are task t's arguments.
  void start(const std::vector<std::vector<std::string>>& args) {
    const std::vector<std::string> a = loopback_addresses(4);
    const std::vector<std::string> chief{a[0]}, workers{a[1], a[2]}, ps{a[3]};
    const std::vector<std::pair<std::string, int>> tasks{{"chief", 0}, {"worker", 0}, {"worker", 1}, {"ps", 0}};
    for (size_t t = 0; t < tasks.size(); ++t) {
      std::vector<std::string> argv{KX_PEERS_TASK_PROGRAM};
      argv.insert(argv.end(), args[t].begin(), args[t].end());
      pids_.push_back(spawn(argv, {"TF_CONFIG=" + cluster_config(chief, workers, ps, tasks[t].first, tasks[t].second)},
                            log(static_cast<int>(t))));
    }
  }
  fs::path log(int task) const { return dir_ / ("task" + std::to_string(task) + ".log"); }
  std::optional<int> wait_task(int task, milliseconds limit) {
    const std::optional<int> code = wait_exit(pids_[static_cast<size_t>(task)], Clock::now() + limit);
    if (code) pids_[static_cast<size_t>(task)] = -1;
    return code;
  }
  static std::string cluster_config(const std::vector<std::string>& chief, const std::vector<std::string>& workers,
                                    const std::vector<std::string>& ps, const std::string& type, int index) {
    return "{\"cluster\": {\"chief\": " + json_list(chief) + ", \"worker\": " + json_list(workers) + ", \"ps\": " +
           json_list(ps) + "}, \"task\": {\"type\": \"" + type + "\", \"index\": " + std::to_string(index) + "}}";
  }

  fs::path dir_;
  std::vector<pid_t> pids_;
};

TEST_F(ClusterPeersTest, EveryRequestIsAnsweredAndAKilledWorkerCostsOnlyItself) {
  // Worker 1 is slow and killed after its first answer; the chief and worker 0 go on past that.
  start({{"150", "10", "5000"}, {"150", "10", "5000"}, {"1000", "20", "5000"}, {"0", "0", "5000"}});
  const Clock::time_point give_up = Clock::now() + milliseconds(60000);
  while (read_file(log(2)).find("first answer") == std::string::npos && Clock::now() < give_up)
    std::this_thread::sleep_for(milliseconds(10));
  kill(pids_[2], SIGKILL);
  EXPECT_EQ(wait_task(2, milliseconds(10000)), std::optional<int>(-SIGKILL));
  for (int t : {0, 1}) {
    EXPECT_EQ(wait_task(t, milliseconds(60000)), std::optional<int>(0)) << read_file(log(t));
    EXPECT_NE(read_file(log(t)).find("done 150"), std::string::npos) << read_file(log(t));
  }
  EXPECT_EQ(wait_task(3, milliseconds(20000)), std::optional<int>(0)) << read_file(log(3));
  const std::string ps = read_file(log(3));
  EXPECT_NE(ps.find("chief (127.0.0.1:"), std::string::npos) << ps;
  EXPECT_NE(ps.find("served 150, goodbye"), std::string::npos) << ps;
  EXPECT_NE(ps.find("worker 1 (127.0.0.1:"), std::string::npos) << ps;
  EXPECT_NE(ps.find("is gone"), std::string::npos) << "the ps names the killed worker:\n" << ps;
  // Both the chief and worker 0 were served to the end.
  size_t ends = 0;
  for (size_t at = ps.find("served 150, goodbye"); at != std::string::npos; at = ps.find("served 150, goodbye", at + 1)) ++ends;
  EXPECT_EQ(ends, 2u) << ps;
}

TEST_F(ClusterPeersTest, AKilledPsFailsEveryOtherTaskNamingIt) {
  const int timeout_ms = 3000;
  const std::string t = std::to_string(timeout_ms);
  start({{"100000", "10", t}, {"100000", "10", t}, {"100000", "10", t}, {"0", "0", t}});
  const Clock::time_point give_up = Clock::now() + milliseconds(60000);
  for (int task : {0, 1, 2})
    while (read_file(log(task)).find("first answer") == std::string::npos && Clock::now() < give_up)
      std::this_thread::sleep_for(milliseconds(10));
  kill(pids_[3], SIGKILL);
  const Clock::time_point killed = Clock::now();
  EXPECT_EQ(wait_task(3, milliseconds(10000)), std::optional<int>(-SIGKILL));
  for (int task : {0, 1, 2}) {
    const auto left = milliseconds(timeout_ms + 5000) - std::chrono::duration_cast<milliseconds>(Clock::now() - killed);
    EXPECT_EQ(wait_task(task, left), std::optional<int>(kCommExit))
        << read_file(log(task));
    EXPECT_NE(read_file(log(task)).find("ps 0 (127.0.0.1:"), std::string::npos) << read_file(log(task));
  }
}

}  // namespace
