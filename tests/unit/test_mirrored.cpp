// MirroredStrategy: N replicas on one global batch compute the update of one device, and a run is
// bitwise repeatable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "distribute/collective.hpp"
#include "distribute/replica_pool.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

// KX_FASHION_MNIST_DIR, for machines without the Debian package (the GPU machine).
const std::string kDataDir = std::getenv("KX_FASHION_MNIST_DIR") ? std::getenv("KX_FASHION_MNIST_DIR")
                                                                  : "/usr/share/datasets/fashion-mnist";

bool have_fashion_mnist() { return std::filesystem::exists(kDataDir + "/train-images-idx3-ubyte.gz"); }

const Dataset& fashion_mnist() {
  static const Dataset all =
      Dataset::from_idx(kDataDir + "/train-images-idx3-ubyte.gz", kDataDir + "/train-labels-idx1-ubyte.gz");
  return all;
}

struct TrainedRun {
  std::vector<float> weights;
  double loss = 0;
};

// The Fashion-MNIST MLP of the main job on `replicas` CPU replicas (1 thread each).
TrainedRun train_on(const std::vector<std::string>& devices, Dataset data, int64_t global_batch, int64_t steps,
                    bool dropout = false, OptimizerKind optimizer = OptimizerKind::Adam) {
  const std::string& device = devices.front();
  const int replicas = static_cast<int>(devices.size());
  Strategy s = Strategy::mirrored(devices);
  if (device == "cpu") s.set_num_threads(replicas);
  s.set_tf32(false);  // the replicas are compared, not the precision of the products
  Model m = Model::sequential(s, {28, 28});
  m.add_flatten();
  m.add_dense(256, Activation::Relu);
  if (dropout) m.add_dropout(0.2f);
  m.add_dense(256, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = 7;
  co.optimizer.kind = optimizer;
  co.optimizer.momentum = optimizer == OptimizerKind::Sgd ? 0.9 : 0.0;
  m.compile(co);
  data.shuffle(data.num_samples(), 3);
  data.batch(global_batch, false);
  FitOptions fo;
  fo.epochs = 1;
  fo.steps_per_epoch = steps;
  History h;
  EXPECT_EQ(m.fit(data, fo, nullptr, &h), Status::Ok);
  return {m.get_weights(), h.get("loss", 0)};
}

TrainedRun train(int replicas, Dataset data, int64_t global_batch, int64_t steps, bool dropout = false,
                 OptimizerKind optimizer = OptimizerKind::Adam, const std::string& device = "cpu") {
  return train_on(std::vector<std::string>(static_cast<size_t>(replicas), device), std::move(data), global_batch,
                  steps, dropout, optimizer);
}

// Every step of a run on one device, taken again from the same state (weights, Adam's slots, step
// count) on N replicas: the largest difference of the weights after the step and of its loss. The
// state goes through a saved model file, which restores onto any replica count.
struct StepDifferences {
  double weights = 0, loss = 0;
};
StepDifferences step_by_step(const Dataset& data, int64_t batch, int64_t steps, int replicas) {
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("kx_mirrored_" + std::to_string(::getpid()) + "_" + std::to_string(replicas) + ".kx"))
                               .string();
  Strategy one_device = Strategy::mirrored({"cpu"}), many = Strategy::mirrored(std::vector<std::string>(
                                                                         static_cast<size_t>(replicas), "cpu"));
  one_device.set_num_threads(1);
  many.set_num_threads(replicas);
  Model one = Model::sequential(one_device, {28, 28});
  one.add_flatten();
  one.add_dense(256, Activation::Relu);
  one.add_dense(256, Activation::Relu);
  one.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = 7;
  one.compile(co);
  StepDifferences worst;
  for (int64_t step = 0; step < steps; ++step) {
    one.save(file);
    Model other = Model::load(many, file);
    const int64_t first = step * batch;
    Dataset b = data.skip(first).take(std::min(batch, data.num_samples() - first));
    b.batch(batch, false);
    FitOptions fo;
    History h1, hn;
    EXPECT_EQ(one.fit(b, fo, nullptr, &h1), Status::Ok);
    EXPECT_EQ(other.fit(b, fo, nullptr, &hn), Status::Ok);
    worst.weights = std::max(worst.weights, test::relative_difference(other.get_weights(), one.get_weights()));
    worst.loss = std::max(worst.loss, std::fabs(hn.get("loss", 0) - h1.get("loss", 0)) / h1.get("loss", 0));
  }
  std::filesystem::remove(file);
  return worst;
}

// N replicas compute the update of one device, up to the order of float sums: checked at each of 200
// steps from the state one device reached. Not by comparing two whole runs: training is chaotic (see
// below), and over 200 Adam steps the reordered sums part the runs for some seeds and not for others.
TEST(Mirrored, ReplicasComputeTheUpdateOfOneDevice) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset data = fashion_mnist().take(96 * 200);
  for (int n : {2, 3}) {
    const StepDifferences d = step_by_step(data, 96, 200, n);
    std::printf("%d replicas vs 1: max relative weight difference %.3g over 200 steps, loss %.3g\n", n, d.weights,
                d.loss);
    EXPECT_LE(d.weights, 1e-5) << n << " replicas";
    EXPECT_LE(d.loss, 1e-5) << n << " replicas";
  }
}

TEST(Mirrored, TwoLogicalReplicasOnOneGpuComputeTheUpdateOfOne) {
  if (device_count(DeviceKind::Cuda) == 0) GTEST_SKIP() << "no CUDA device";
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset data = fashion_mnist().take(96 * 200);
  const TrainedRun one = train(1, data, 96, 200, false, OptimizerKind::Adam, "cuda:0");
  const TrainedRun two = train(2, data, 96, 200, false, OptimizerKind::Adam, "cuda:0");
  EXPECT_LE(test::relative_difference(two.weights, one.weights), 1e-5);
  EXPECT_TRUE(two.weights == train(2, data, 96, 200, false, OptimizerKind::Adam, "cuda:0").weights);
}

// One replica per GPU: the gradients are summed by NCCL.
TEST(Mirrored, ReplicasOnDistinctGpusComputeTheUpdateOfOne) {
  if (device_count(DeviceKind::Cuda) < 2) GTEST_SKIP() << "fewer than two CUDA devices";
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset data = fashion_mnist().take(96 * 200);
  const TrainedRun one = train_on({"cuda:0"}, data, 96, 200);
  const TrainedRun two = train_on({"cuda:0", "cuda:1"}, data, 96, 200);
  std::printf("cuda:0 + cuda:1 vs cuda:0: max relative weight difference %.3g\n",
              test::relative_difference(two.weights, one.weights));
  EXPECT_LE(test::relative_difference(two.weights, one.weights), 1e-5);
  EXPECT_TRUE(two.weights == train_on({"cuda:0", "cuda:1"}, data, 96, 200).weights);
}

TEST(Mirrored, MixingLogicalReplicasAndSeveralDevicesIsAClearError) {
  const Device cpu{DeviceKind::Cpu, 0}, gpu0{DeviceKind::Cuda, 0}, gpu1{DeviceKind::Cuda, 1};
  EXPECT_NO_THROW(distribute::require_supported_replicas({cpu, cpu, cpu}));
  EXPECT_NO_THROW(distribute::require_supported_replicas({gpu0, gpu0}));
  EXPECT_NO_THROW(distribute::require_supported_replicas({gpu0, gpu1}));
  for (const std::vector<Device>& mixed : {std::vector<Device>{cpu, gpu0}, {gpu0, gpu0, gpu1}}) {
    try {
      distribute::require_supported_replicas(mixed);
      ADD_FAILURE() << "accepted " << mixed.size() << " mixed replicas";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Unsupported);
      EXPECT_NE(std::string(e.what()).find("mixes"), std::string::npos) << e.what();
    }
  }
}

TEST(Mirrored, RunsAreBitwiseRepeatable) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset data = fashion_mnist().take(96 * 50);
  const TrainedRun a = train(3, data, 96, 50, true);
  const TrainedRun b = train(3, data, 96, 50, true);
  EXPECT_TRUE(a.weights == b.weights);
  EXPECT_EQ(a.loss, b.loss);
}

TEST(Mirrored, DropoutMasksDoNotDependOnTheSplit) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset data = fashion_mnist().take(96 * 30);
  const TrainedRun one = train(1, data, 96, 30, true);
  const TrainedRun three = train(3, data, 96, 30, true);
  EXPECT_LE(test::relative_difference(three.weights, one.weights), 1e-5);
}

// Training is chaotic: replicas sum gradients in another order than one device, and after enough steps
// a ReLU unit near zero goes one way in one run and the other way in the other (on this data, with
// Keras 3's Adam rounding, from about 60 to 100 steps on for some seeds, and never for others; the same
// held for kx's earlier rounding with other seeds). So "matches one replica" is checked step by step
// from equal states (above, and for uneven batches here) and by the epoch loss over the whole 50,000
// samples.

// 96 * 40 + 80 samples: the 41st step holds 80 rows; + 4: 4 rows, fewer than 7 replicas, so some
// replicas hold nothing in that step.
TEST(Mirrored, UnevenLastBatchMatchesOneReplica) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  for (int64_t samples : {96 * 40 + 80, 96 * 40 + 4}) {
    const Dataset data = fashion_mnist().take(samples);
    for (int n : {3, 7}) {
      const StepDifferences d = step_by_step(data, 96, 41, n);
      std::printf("%lld samples, %d replicas vs 1: max relative weight difference %.3g\n",
                  static_cast<long long>(samples), n, d.weights);
      EXPECT_LE(d.weights, 1e-5) << samples << " samples, " << n << " replicas";
      EXPECT_LE(d.loss, 1e-5) << samples << " samples, " << n << " replicas";
    }
  }
}

// One SGD step on the last, short batch of 50,000 / 96 (80 rows) and of 49,924 / 96 (4 rows), from the
// weights one replica reached after the 520 full batches.
TEST(Mirrored, UnevenStepFromTrainedWeightsMatchesOneReplica) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset all = fashion_mnist().take(50000);
  const std::vector<float> trained = train(1, all, 96, 520).weights;
  for (int64_t rows : {80, 4}) {
    const Dataset last = all.skip(50000 - rows);
    std::vector<std::vector<float>> after;
    for (int n : {1, 3, 7}) {
      Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(n), "cpu")), {28, 28});
      m.add_flatten();
      m.add_dense(256, Activation::Relu);
      m.add_dense(256, Activation::Relu);
      m.add_dense(10, Activation::Softmax);
      CompileOptions co;
      co.optimizer.kind = OptimizerKind::Sgd;
      m.compile(co);
      m.set_weights(trained);
      Dataset d = last;
      d.batch(96, false);
      ASSERT_EQ(m.fit(d, FitOptions{}, nullptr, nullptr), Status::Ok);
      after.push_back(m.get_weights());
    }
    EXPECT_NE(after[0], trained);
    EXPECT_LE(test::relative_difference(after[1], after[0]), 1e-6) << rows << " rows, 3 replicas";
    EXPECT_LE(test::relative_difference(after[2], after[0]), 1e-6) << rows << " rows, 7 replicas";
  }
}

TEST(Mirrored, UnevenEpochOf50000SamplesTrainsLikeOneReplica) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const Dataset data = fashion_mnist().take(50000);
  const TrainedRun one = train(1, data, 96, 521);
  for (int n : {3, 7}) {
    const TrainedRun many = train(n, data, 96, 521);
    std::printf("50000 samples, %d replicas: epoch loss %.6f, one replica %.6f\n", n, many.loss, one.loss);
    EXPECT_NEAR(many.loss, one.loss, 1e-2 * one.loss);
  }
}

TEST(Mirrored, EvaluateSplitsBatchesAcrossReplicas) {
  const std::vector<float> x = test::random_floats(250 * 6, 5);
  std::vector<float> y(250);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  const Dataset d = Dataset::from_arrays(x.data(), DType::F32, {250, 6}, y.data(), DType::F32, {250});
  std::vector<EvalResult> results;
  for (int n : {1, 2, 7}) {
    Model m = Model::sequential(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(n), "cpu")), {6});
    m.add_dense(8, Activation::Tanh);
    m.add_dense(3, Activation::Softmax);
    CompileOptions co;
    co.accuracy = true;
    m.compile(co);
    Dataset eval = d;
    eval.batch(64, false);
    results.push_back(m.evaluate(eval));
  }
  for (const EvalResult& r : results) {
    EXPECT_NEAR(r.loss, results[0].loss, 1e-6);
    EXPECT_DOUBLE_EQ(r.accuracy, results[0].accuracy);
  }
}

TEST(ReplicaPool, AFailingReplicaReachesTheCallerAndNothingHangs) {
  distribute::ReplicaPool pool(4);
  std::vector<int> ran(4, 0);
  const auto task = [&](int k) {
    ++ran[static_cast<size_t>(k)];
    if (k == 2) fail(Status::OutOfMemory, "replica 2 ran out of memory");
    if (k == 3) fail(Status::InvalidArgument, "replica 3 failed too");
  };
  try {
    pool.run(task);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::OutOfMemory);  // the lowest failing replica's
  }
  EXPECT_EQ(ran, std::vector<int>({1, 1, 1, 1}));  // every replica ran to its end
  int sum = 0;
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 100; ++i) pool.run([&](int k) { seen[static_cast<size_t>(k)] += k; });
  for (int k = 0; k < 4; ++k) sum += seen[static_cast<size_t>(k)];
  EXPECT_EQ(sum, 100 * (0 + 1 + 2 + 3));
}

TEST(Mirrored, ABadLabelStopsFitOnTheCallingThread) {
  const std::vector<float> x = test::random_floats(40 * 4, 9);
  std::vector<float> y(40, 1.0f);
  y[37] = 5.0f;
  Dataset bad = Dataset::from_arrays(x.data(), DType::F32, {40, 4}, y.data(), DType::F32, {40});
  Model m = Model::sequential(Strategy::mirrored({"cpu", "cpu", "cpu"}), {4});
  m.add_dense(3, Activation::Softmax);
  m.compile(CompileOptions{});
  EXPECT_EQ(test::status_of([&] { m.fit(bad, FitOptions{}, nullptr, nullptr); }), Status::InvalidArgument);
  y[37] = 2.0f;
  Dataset good = Dataset::from_arrays(x.data(), DType::F32, {40, 4}, y.data(), DType::F32, {40});
  good.batch(8, false);
  EXPECT_EQ(m.fit(good, FitOptions{}, nullptr, nullptr), Status::Ok);
}

TEST(Mirrored, RejectsMixedAndUnknownDevices) {
  EXPECT_EQ(test::status_of([&] { Strategy::mirrored({"cpu", "gpu"}); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { Strategy::mirrored({"cpu", "cuda:0"}); }),
            device_count(DeviceKind::Cuda) > 0 ? Status::InvalidArgument : Status::Device);
}

}  // namespace
}  // namespace kx
