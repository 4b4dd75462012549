// MultiWorkerMirroredStrategy with real worker processes on loopback, each running the C sample
// samples/c/multi_worker.c on Fashion-MNIST: workers agree bit for bit, train as the same replicas in
// one process do, repeat bitwise, start from TF_CONFIG or mpirun, survive nothing silently (a killed or
// stopped worker is KX_E_COMM on the others within the timeout) and resume from the chief's checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "processes.hpp"

namespace {

using namespace kx::test_processes;

constexpr int kCommExit = 3;  // the sample's exit code for KX_E_COMM
// KX_FASHION_MNIST_DIR, for machines without the Debian package (the GPU machine).
const char* const kData =
    std::getenv("KX_FASHION_MNIST_DIR") ? std::getenv("KX_FASHION_MNIST_DIR") : "/usr/share/datasets/fashion-mnist";

class MultiWorkerFit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_module()) GTEST_SKIP() << "no multi-worker module (" << KX_WORKERS_MODULE_PATH << "): Gloo not found";
    if (!fs::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist missing";
    dir_ = fs::temp_directory_path() / ("kx-mwfit-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : pids_) kill_child(pid);
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }

  // Starts `workers` workers (TF_CONFIG) with these sample arguments; worker i writes weights to
  // <tag><i>.bin and logs to <tag><i>.log.
  void start(int workers, const std::vector<std::string>& args, const std::string& tag) {
    const std::vector<std::string> addresses = loopback_addresses(workers);
    for (int i = 0; i < workers; ++i) {
      // One thread each: the workers (and other tests) share the machine's cores.
      std::vector<std::string> argv{KX_MULTI_WORKER_PROGRAM, "verbose=0", "threads=1",
                                    "weights=" + (dir_ / (tag + std::to_string(i) + ".bin")).string()};
      argv.insert(argv.end(), args.begin(), args.end());
      pids_.push_back(spawn(argv, {"TF_CONFIG=" + tf_config(addresses, "worker", i)}, dir_ / (tag + std::to_string(i) + ".log")));
    }
  }
  // Waits for every started worker; returns their exit codes (nullopt: still running at the deadline).
  std::vector<std::optional<int>> finish(milliseconds limit = milliseconds(240000)) {
    const Clock::time_point deadline = Clock::now() + limit;
    std::vector<std::optional<int>> codes;
    for (pid_t pid : pids_) codes.push_back(wait_exit(pid, deadline));
    for (size_t i = 0; i < pids_.size(); ++i)
      if (codes[i]) pids_[i] = -1;
    std::erase(pids_, -1);
    return codes;
  }
  // Runs `workers` workers to the end; every one must succeed.
  void run(int workers, const std::vector<std::string>& args, const std::string& tag) {
    start(workers, args, tag);
    const std::vector<std::optional<int>> codes = finish();
    for (int i = 0; i < workers; ++i)
      ASSERT_EQ(codes[static_cast<size_t>(i)], std::optional<int>(0))
          << tag << i << " log:\n" << read_file(dir_ / (tag + std::to_string(i) + ".log"));
  }
  std::vector<float> weights(const std::string& name) const {
    const std::string bytes = read_file(dir_ / name);
    std::vector<float> w(bytes.size() / sizeof(float));
    std::memcpy(w.data(), bytes.data(), w.size() * sizeof(float));
    return w;
  }
  std::string bytes(const std::string& name) const { return read_file(dir_ / name); }

  fs::path dir_;
  std::vector<pid_t> pids_;
};

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return a.size() == b.size() && scale > 0 ? diff / scale : 1e30;
}

// 200 steps of the MLP at a global batch of 96.
const std::vector<std::string> kRun{"steps=200", "samples=19200"};

TEST_F(MultiWorkerFit, WorkersTrainAsTheSameReplicasInOneProcessAndRepeatBitwise) {
  // 2 workers x 1 replica: the same sums in the same order as 2 replicas in one process.
  std::vector<std::string> args = kRun;
  args.push_back("batch=48");
  run(2, args, "a");
  run(2, args, "again");
  args.push_back("replicas=2");
  run(1, args, "local");
  EXPECT_FALSE(bytes("a0.bin").empty());
  EXPECT_EQ(bytes("a0.bin"), bytes("a1.bin")) << "the workers hold different weights";
  EXPECT_EQ(bytes("a0.bin"), bytes("again0.bin")) << "two runs differ";
  EXPECT_EQ(bytes("a0.bin"), bytes("local0.bin")) << "2 workers differ from 2 replicas in one process";
  // 2 workers x 2 replicas: local sums first, so the order differs from 4 replicas in one process, and
  // the weights by rounding. Over a whole run that stops being small: once a ReLU's input is within
  // rounding of zero, the two runs mask it differently and that sample's whole gradient differs (seen
  // after about 40 steps with the AVX2 GEMM). So 20 steps here; MultiWorkerStepwise checks every step.
  std::vector<std::string> two_by_two{"steps=20", "samples=1920", "batch=24", "replicas=2"};
  run(2, two_by_two, "b");
  two_by_two.back() = "replicas=4";
  run(1, two_by_two, "four");
  EXPECT_EQ(bytes("b0.bin"), bytes("b1.bin"));
  const double d = relative_difference(weights("b0.bin"), weights("four0.bin"));
  std::printf("2 workers x 2 replicas vs 4 replicas in one process: max relative weight difference %.3g\n", d);
  EXPECT_LE(d, 1e-5);
}

// The job against one replica in one process: at each of 200 steps of the MLP every worker takes the
// step again from the state one replica reached (kx_multi_worker_stepwise). Whole runs cannot be
// compared against one replica: see multi_worker_stepwise.cpp.
// Under the sanitizers (about 5x slower) 40 steps.
#ifdef KX_TEST_SANITIZED
constexpr int kStepwiseSteps = 40;
#else
constexpr int kStepwiseSteps = 200;
#endif

class MultiWorkerStepwise : public MultiWorkerFit {
 protected:
  // Worker i's "weights loss" differences.
  std::pair<double, double> differences(const std::string& name) const {
    double w = -1, l = -1;
    std::sscanf(bytes(name).c_str(), "%lf %lf", &w, &l);
    return {w, l};
  }
  void expect_one_replica(const std::string& tag, int workers, const std::string& what) {
    for (int i = 0; i < workers; ++i) {
      const auto [w, l] = differences(tag + std::to_string(i) + ".txt");
      std::printf("%s, worker %d: max relative weight difference %.3g, loss %.3g over %d steps\n", what.c_str(), i,
                  w, l, kStepwiseSteps);
      EXPECT_GE(w, 0) << what << ", worker " << i << ": no result";
      EXPECT_LE(w, 1e-5) << what << ", worker " << i;
      EXPECT_GE(l, 0) << what << ", worker " << i << ": no result";
      EXPECT_LE(l, 1e-5) << what << ", worker " << i;
    }
  }
  // False when a worker found no CUDA device (device "cuda": worker i on cuda:i, NCCL required).
  bool run_stepwise(int workers, int replicas, const std::string& tag, const std::string& device = "cpu") {
    if (device != "cpu") {  // every worker's GPU must exist, or the others would wait for it to join
      pids_.push_back(spawn({KX_STEPWISE_PROGRAM, "probe=1", "device=cuda:" + std::to_string(workers - 1)}, {},
                            dir_ / (tag + "-probe.log")));
      if (finish().front() == std::optional<int>(77)) return false;
    }
    const std::vector<std::string> addresses = loopback_addresses(workers);
    for (int i = 0; i < workers; ++i) {
      std::vector<std::string> env{"TF_CONFIG=" + tf_config(addresses, "worker", i)};
      if (device != "cpu") env.push_back("KX_NCCL_ACROSS_WORKERS=1");
      pids_.push_back(spawn({KX_STEPWISE_PROGRAM, "replicas=" + std::to_string(replicas),
                             "steps=" + std::to_string(kStepwiseSteps), "batch=96",
                             "device=" + (device == "cpu" ? device : "cuda:" + std::to_string(i)),
                             "out=" + (dir_ / (tag + std::to_string(i) + ".txt")).string()},
                            env, dir_ / (tag + std::to_string(i) + ".log")));
    }
    const std::vector<std::optional<int>> codes = finish();
    for (int i = 0; i < workers; ++i) {
      EXPECT_EQ(codes[static_cast<size_t>(i)], std::optional<int>(0))
          << tag << i << " log:\n" << read_file(dir_ / (tag + std::to_string(i) + ".log"));
    }
    return true;
  }
};

TEST_F(MultiWorkerStepwise, TwoWorkersOfOneAndOfTwoReplicasComputeTheUpdateOfOneReplica) {
  ASSERT_TRUE(run_stepwise(2, 1, "one"));
  expect_one_replica("one", 2, "TF_CONFIG, 2 workers x 1 replica vs 1 process x 1 replica");
  ASSERT_TRUE(run_stepwise(2, 2, "two"));
  expect_one_replica("two", 2, "TF_CONFIG, 2 workers x 2 replicas vs 1 process x 1 replica");
}

// NCCL across worker processes (KX_NCCL_ACROSS_WORKERS=1 requires it): one worker on one GPU, a
// communicator of 1 rank made as every multi-worker one is (the chief's id, ncclCommInitRankConfig),
// against one CPU replica; then 2 workers on 2 GPUs where a machine has them.
TEST_F(MultiWorkerStepwise, GpuWorkersThroughNcclComputeTheUpdateOfOneCpuReplica) {
  if (!run_stepwise(1, 1, "gpu", "cuda")) GTEST_SKIP() << "no CUDA device";
  expect_one_replica("gpu", 1, "TF_CONFIG, 1 worker on cuda:0 through NCCL vs 1 CPU replica");
  if (!run_stepwise(2, 1, "gpus", "cuda")) GTEST_SKIP() << "fewer than two CUDA devices";
  expect_one_replica("gpus", 2, "TF_CONFIG, 2 workers on cuda:0 and cuda:1 through NCCL vs 1 CPU replica");
}

TEST_F(MultiWorkerStepwise, UnderMpirunTwoWorkersComputeTheUpdateOfOneReplica) {
  if (std::string(KX_MPIRUN).empty()) GTEST_SKIP() << "no mpirun found at configure time (Debian: openmpi-bin)";
  const fs::path out = dir_ / "mpi";
  fs::create_directories(out);
  const std::string script = "exec " + std::string(KX_STEPWISE_PROGRAM) +
                             " replicas=1 steps=" + std::to_string(kStepwiseSteps) + " batch=96 out=" + out.string() + "/mpi$OMPI_COMM_WORLD_RANK.txt";
  pids_.push_back(spawn({KX_MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", "/bin/sh", "-c", script},
                        {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", asan_options_without_leak_check()},
                        dir_ / "mpirun.log"));
  const std::vector<std::optional<int>> codes = finish();
  const std::string log = read_file(dir_ / "mpirun.log");
  if (log.find("built without MPI") != std::string::npos) GTEST_SKIP() << log;
  ASSERT_EQ(codes[0], std::optional<int>(0)) << log;
  expect_one_replica("mpi/mpi", 2, "mpirun, 2 workers x 1 replica vs 1 process x 1 replica");
}

TEST_F(MultiWorkerFit, MpirunStartsTheSameJob) {
  if (std::string(KX_MPIRUN).empty()) GTEST_SKIP() << "no mpirun found at configure time (Debian: openmpi-bin)";
  std::vector<std::string> args = {"steps=40", "samples=3840", "batch=48"};
  run(2, args, "tf");
  // Sums through shared memory (workers on one host), then point to point (as across hosts).
  for (const std::string path : {"shared", "p2p"}) {
    const fs::path out = dir_ / path;
    fs::create_directories(out);
    // Each rank writes its own file: the rank is in the sample's environment, not its arguments.
    const std::string script = "w=" + out.string() + "/w$OMPI_COMM_WORLD_RANK.bin; exec " + KX_MULTI_WORKER_PROGRAM +
                               " verbose=0 threads=1 steps=40 samples=3840 batch=48 weights=$w";
    pids_.push_back(spawn({KX_MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", "KX_MPI_SHARED_MEMORY",
                           "/bin/sh", "-c", script},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", asan_options_without_leak_check(),
                           std::string("KX_MPI_SHARED_MEMORY=") + (path == "shared" ? "1" : "0")},
                          dir_ / (path + ".log")));
    const std::vector<std::optional<int>> codes = finish();
    const std::string log = read_file(dir_ / (path + ".log"));
    if (log.find("built without MPI") != std::string::npos) GTEST_SKIP() << log;
    ASSERT_EQ(codes[0], std::optional<int>(0)) << path << "\n" << log;
    EXPECT_EQ(bytes(path + "/w0.bin"), bytes("tf0.bin")) << path;
    EXPECT_EQ(bytes(path + "/w1.bin"), bytes("tf0.bin")) << path;
  }
}

// A value KX_MPI_SHARED_MEMORY does not take fails every worker with KX_E_INVALID_ARGUMENT naming the
// variable and its values (at the first sum: the host's workers are in a collective when it is read).
TEST_F(MultiWorkerFit, UnderMpirunABadSharedMemorySwitchIsAnError) {
  if (std::string(KX_MPIRUN).empty()) GTEST_SKIP() << "no mpirun found at configure time (Debian: openmpi-bin)";
  const std::string script = std::string("exec ") + KX_MULTI_WORKER_PROGRAM + " verbose=0 threads=1 steps=4 samples=384 batch=48";
  pids_.push_back(spawn({KX_MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", "KX_MPI_SHARED_MEMORY",
                         "/bin/sh", "-c", script},
                        {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", asan_options_without_leak_check(),
                         "KX_MPI_SHARED_MEMORY=yes"},
                        dir_ / "mpirun.log"));
  const std::vector<std::optional<int>> codes = finish();
  const std::string log = read_file(dir_ / "mpirun.log");
  if (log.find("built without MPI") != std::string::npos) GTEST_SKIP() << log;
  EXPECT_NE(codes[0], std::optional<int>(0)) << log;
  EXPECT_NE(log.find("KX_E_INVALID_ARGUMENT"), std::string::npos) << log;
  EXPECT_NE(log.find("KX_MPI_SHARED_MEMORY=yes: expected 0, off, 1 or on, or unset"), std::string::npos) << log;
}

// Under mpirun MPI carries the tensors and has no timeout of its own: a worker stopped mid-epoch
// (SIGSTOP) must still fail the chief with KX_E_COMM naming it within the timeout + 5 s, and the job
// must end (mpirun stops the stopped worker once the chief exits).
TEST_F(MultiWorkerFit, UnderMpirunAStoppedWorkerFailsTheChiefInTime) {
  if (std::string(KX_MPIRUN).empty()) GTEST_SKIP() << "no mpirun found at configure time (Debian: openmpi-bin)";
  const fs::path ckpt = dir_ / "ckpt";
  // Rank 1 stops itself once the chief has written the first epoch's checkpoint ($$ is the program
  // after exec); each rank logs to its own file.
  const std::string script =
      "log=" + dir_.string() + "/rank$OMPI_COMM_WORLD_RANK.log; "
      "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (while [ ! -e " + (ckpt / "epoch-01.kx").string() +
      " ]; do sleep 0.02; done; kill -STOP $$) & fi; exec " + KX_MULTI_WORKER_PROGRAM +
      " verbose=0 threads=1 epochs=6 samples=4800 batch=48 timeout_ms=3000 checkpoints=" + ckpt.string() + " > $log 2>&1";
  pids_.push_back(spawn({KX_MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", "/bin/sh", "-c", script},
                        {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", asan_options_without_leak_check()},
                        dir_ / "mpirun.log"));
  const Clock::time_point give_up = Clock::now() + milliseconds(120000);
  while (!fs::exists(ckpt / "epoch-01.kx") && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(fs::exists(ckpt / "epoch-01.kx")) << read_file(dir_ / "mpirun.log") << read_file(dir_ / "rank0.log");
  const Clock::time_point stopped = Clock::now();
  // The chief's log gets its error line when it gives up; mpirun then ends the job.
  std::string chief;
  while (Clock::now() < stopped + milliseconds(3000 + 5000)) {
    chief = read_file(dir_ / "rank0.log");
    if (chief.find("worker error") != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - stopped).count();
  std::printf("under mpirun, a stopped worker: the chief failed after %.2f s: %s\n", seconds, chief.c_str());
  EXPECT_NE(chief.find("KX_E_COMM"), std::string::npos) << chief;
  EXPECT_NE(chief.find("worker 1"), std::string::npos) << "the message names the worker: " << chief;
  const std::vector<std::optional<int>> codes = finish(milliseconds(30000));
  EXPECT_TRUE(codes[0].has_value()) << "mpirun did not end the job: " << read_file(dir_ / "mpirun.log");
  EXPECT_NE(codes[0], std::optional<int>(0));
}

// A worker killed (SIGKILL) or stopped (SIGSTOP) mid-epoch: the survivor fails with KX_E_COMM naming it
// within the timeout + 5 s; started again with the same checkpoint directory, the job finishes with
// the weights of a run never interrupted.
TEST_F(MultiWorkerFit, AKilledWorkerStopsTheOthersAndARestartResumes) {
  // Six short epochs: the kill lands after the first checkpoint with several epochs still to run, however
  // fast the machine.
  const std::vector<std::string> job{"epochs=6", "samples=4800", "batch=48", "timeout_ms=3000"};
  run(2, {"epochs=6", "samples=4800", "batch=48", "checkpoints=" + (dir_ / "ckpt-whole").string()}, "whole");
  for (int sig : {SIGKILL, SIGSTOP}) {
    const std::string tag = sig == SIGKILL ? "killed" : "stopped";
    const std::string ckpt = "checkpoints=" + (dir_ / ("ckpt-" + tag)).string();
    std::vector<std::string> args = job;
    args.push_back(ckpt);
    start(2, args, tag);
    // Signal worker 1 once the chief has written the first epoch's checkpoint (the second epoch runs).
    const Clock::time_point give_up = Clock::now() + milliseconds(120000);
    while (!fs::exists(dir_ / ("ckpt-" + tag) / "epoch-01.kx") && Clock::now() < give_up)
      std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(fs::exists(dir_ / ("ckpt-" + tag) / "epoch-01.kx")) << read_file(dir_ / (tag + "0.log"));
    const pid_t victim = pids_[1];
    ASSERT_GT(victim, 0);  // kill() with 0 or -1 would signal this process's group or every process
    kill(victim, sig);
    const Clock::time_point signalled = Clock::now();
    const std::optional<int> chief = wait_exit(pids_[0], signalled + milliseconds(3000 + 5000));
    const double seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
    ASSERT_EQ(chief, std::optional<int>(kCommExit)) << read_file(dir_ / (tag + "0.log"));
    pids_[0] = -1;
    kill_child(victim);
    pids_.clear();
    const std::string log = read_file(dir_ / (tag + "0.log"));
    std::printf("%s worker: the chief failed after %.2f s: %s\n", tag.c_str(), seconds, log.c_str());
    EXPECT_NE(log.find("KX_E_COMM"), std::string::npos);
    EXPECT_NE(log.find("worker 1"), std::string::npos) << "the message names the worker";
    // The job again, from the chief's checkpoint.
    run(2, args, tag + "-resumed");
    EXPECT_EQ(bytes(tag + "-resumed0.bin"), bytes("whole0.bin")) << tag;
    EXPECT_EQ(bytes(tag + "-resumed1.bin"), bytes("whole0.bin")) << tag;
  }
}

// The chief's callbacks change what every worker does: a learning-rate schedule it runs reaches the
// others (their weights stay equal, and equal to the same replicas in one process), and a failure of
// one of its callbacks (a checkpoint it cannot write) fails every worker at once with that error.
TEST_F(MultiWorkerFit, TheChiefsCallbacksReachEveryWorker) {
  std::vector<std::string> args{"steps=60", "samples=5760", "batch=48", "cosine_decay=60"};
  run(2, args, "decay");
  args.push_back("replicas=2");
  run(1, args, "local");
  EXPECT_EQ(bytes("decay0.bin"), bytes("decay1.bin")) << "the schedule did not reach worker 1";
  EXPECT_EQ(bytes("decay0.bin"), bytes("local0.bin"));
  start(2, {"epochs=2", "samples=960", "batch=48", "checkpoints=/proc/kx-cannot-write-here"}, "io");
  const Clock::time_point t0 = Clock::now();
  const std::vector<std::optional<int>> codes = finish(milliseconds(30000));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int i = 0; i < 2; ++i) {
    const std::string log = read_file(dir_ / ("io" + std::to_string(i) + ".log"));
    EXPECT_EQ(codes[static_cast<size_t>(i)], std::optional<int>(1)) << log;
    EXPECT_NE(log.find("KX_E_IO"), std::string::npos) << log;
  }
  EXPECT_NE(read_file(dir_ / "io1.log").find("the chief stopped training"), std::string::npos);
  EXPECT_LT(seconds, 20.0) << "worker 1 waited for a timeout instead of hearing from the chief";
}

TEST_F(MultiWorkerFit, AnUnevenLastBatchAcrossThreeWorkers) {
  // 96 * 12 + 50 samples: the 13th batch holds 50 rows, 17/17/16 across the workers.
  const std::vector<std::string> args{"samples=1202", "batch=32"};
  run(3, args, "three");
  std::vector<std::string> local = args;
  local.push_back("replicas=3");
  run(1, local, "local");
  EXPECT_EQ(bytes("three0.bin"), bytes("three1.bin"));
  EXPECT_EQ(bytes("three0.bin"), bytes("three2.bin"));
  // Every launcher sums in rank order, as one process adds its replicas: the same bits.
  EXPECT_EQ(bytes("three0.bin"), bytes("local0.bin")) << "3 workers differ from 3 replicas in one process";
}

// 3 and 4 workers hold the bits of as many replicas in one process, on one host through shared memory
// and through TCP (KX_SHARED_MEMORY=0, the path workers on several hosts take). Gloo's ring, which
// added each chunk starting at another worker, differed from 3 workers on.
TEST_F(MultiWorkerFit, ThreeAndFourWorkersEqualTheReplicasOfOneProcessOnEveryPath) {
  for (int workers : {3, 4}) {
    const std::vector<std::string> args{"samples=1536", "batch=96"};
    std::vector<std::string> local = args;
    local.push_back("replicas=" + std::to_string(workers));
    const std::string n = std::to_string(workers);
    run(1, local, "local" + n + "_");
    run(workers, args, "shm" + n + "_");
    setenv("KX_SHARED_MEMORY", "0", 1);
    run(workers, args, "tcp" + n + "_");
    unsetenv("KX_SHARED_MEMORY");
    for (int i = 0; i < workers; ++i) {
      const std::string w = std::to_string(i);
      EXPECT_EQ(bytes("shm" + n + "_" + w + ".bin"), bytes("local" + n + "_0.bin")) << n << " workers, shared memory, worker " << w;
      EXPECT_EQ(bytes("tcp" + n + "_" + w + ".bin"), bytes("local" + n + "_0.bin")) << n << " workers, TCP, worker " << w;
    }
  }
}

// Keras's class_weight: each worker weighs its share of the batch, and the epoch's weighted loss and
// accuracy add every worker's sums (the accuracy's weight sum included).
TEST_F(MultiWorkerFit, ClassWeightAcrossThreeWorkersAsInOneProcess) {
  const std::vector<std::string> args{"samples=1202", "batch=32", "class_weight=2,0.5,1,3,0,1,1,0.25"};
  run(3, args, "weighted");
  std::vector<std::string> local = args;
  local.push_back("replicas=3");
  run(1, local, "weighted_local");
  const double d = relative_difference(weights("weighted0.bin"), weights("weighted_local0.bin"));
  std::printf("class_weight, 3 workers vs 3 replicas in one process: max relative weight difference %.3g\n", d);
  EXPECT_LE(d, 1e-5);
  // "worker 0: last epoch loss L accuracy A" from each chief.
  auto figures = [&](const std::string& log) {
    const std::string text = bytes(log);
    double loss = -1, accuracy = -1;
    const size_t at = text.find("last epoch loss");
    if (at != std::string::npos) std::sscanf(text.c_str() + at, "last epoch loss %lf accuracy %lf", &loss, &accuracy);
    return std::make_pair(loss, accuracy);
  };
  const auto [loss3, acc3] = figures("weighted0.log");
  const auto [loss1, acc1] = figures("weighted_local0.log");
  ASSERT_GT(loss1, 0);
  ASSERT_GT(acc1, 0);
  EXPECT_NEAR(loss3, loss1, 1e-5 * loss1);
  EXPECT_NEAR(acc3, acc1, 1e-6);
}

TEST_F(MultiWorkerFit, WorkersThatDoNotTrainTheSameThingAllFailClearly) {
  // Two workers, the i-th with arguments extra[i] besides the common ones: every worker fails, saying
  // what differs.
  auto expect_refused = [&](const std::vector<std::vector<std::string>>& extra, const std::string& tag,
                            const std::vector<std::string>& named) {
    const std::vector<std::string> addresses = loopback_addresses(2);
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> args{KX_MULTI_WORKER_PROGRAM, "verbose=0", "threads=1", "samples=960"};
      args.insert(args.end(), extra[static_cast<size_t>(i)].begin(), extra[static_cast<size_t>(i)].end());
      pids_.push_back(spawn(args, {"TF_CONFIG=" + tf_config(addresses, "worker", i)},
                            dir_ / (tag + std::to_string(i) + ".log")));
    }
    const std::vector<std::optional<int>> codes = finish(milliseconds(60000));
    for (int i = 0; i < 2; ++i) {
      const std::string log = read_file(dir_ / (tag + std::to_string(i) + ".log"));
      EXPECT_EQ(codes[static_cast<size_t>(i)], std::optional<int>(1)) << log;
      EXPECT_NE(log.find("do not train the same thing"), std::string::npos) << log;
      for (const std::string& words : named) EXPECT_NE(log.find(words), std::string::npos) << words << "\n" << log;
    }
  };
  expect_refused({{"batch=48"}, {"batch=32"}}, "batch", {"batch=96", "batch=64"});  // per replica: global 96 and 64
  // Weighted samples on one worker only would weigh half of each global batch: refused too.
  expect_refused({{"class_weight=2,0.5,1,3,0,1,1,0.25"}, {}}, "weights", {"sample weights="});
  // No cluster at all: a clear error, not a hang.
  pids_.push_back(spawn({KX_MULTI_WORKER_PROGRAM}, {}, dir_ / "alone.log"));
  const std::vector<std::optional<int>> alone = finish(milliseconds(30000));
  const std::string log = read_file(dir_ / "alone.log");
  EXPECT_EQ(alone[0], std::optional<int>(1)) << log;
  EXPECT_NE(log.find("KX_E_INVALID_ARGUMENT"), std::string::npos) << log;
}

}  // namespace
