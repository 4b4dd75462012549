// How a training step is run and fed, checked on the CPU: steps recorded once and replayed (CUDA
// graphs) through the recording backend, which gives any backend CUDA graph semantics (a replay runs
// the recorded calls with their recorded arguments and reads memory as it is when it runs); and
// datasets streamed batch by batch through transfer rings, as those too large for a GPU are.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/recording_backend.hpp"
#include "config/test_hooks.hpp"
#include "core/train/step_graphs.hpp"
#include "distribute/collective_factory.hpp"
#include "kx/error.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

namespace kx {
namespace {

// KX_STEP_GRAPHS set (or unset, for nullptr) for the life of the guard.
class GraphSetting {
 public:
  explicit GraphSetting(const char* value) {
    if (const char* old = std::getenv("KX_STEP_GRAPHS")) old_ = old, had_ = true;
    if (value)
      setenv("KX_STEP_GRAPHS", value, 1);
    else
      unsetenv("KX_STEP_GRAPHS");
  }
  ~GraphSetting() {
    if (had_)
      setenv("KX_STEP_GRAPHS", old_.c_str(), 1);
    else
      unsetenv("KX_STEP_GRAPHS");
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(StepGraphs, AReplayReadsTheValuesOfTheStepItRuns) {
  auto be = backend::make_recording_backend(backend::make_cpu_backend(1));
  const int64_t n = 100;
  FloatBuffer p(n, 1.0f), g = test::to_buffer(test::random_floats(n, 3));
  float rate = 0.5f;
  auto graph = be->capture([&] { be->sgd_update(n, p.data(), g.data(), nullptr, &rate, 0.0f, nullptr); });
  ASSERT_TRUE(graph);
  for (float w : p) ASSERT_EQ(w, 1.0f) << "recording runs nothing";
  rate = 0.25f;  // the next step's rate, written after the recording
  graph->launch();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 1.0f - 0.25f * g[i]) << i;
  g.assign(n, 2.0f);
  const FloatBuffer before = p;
  graph->launch();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], before[i] - 0.25f * 2.0f) << i;
}

TEST(StepGraphs, ARecordingThatWaitsForTheDeviceYieldsNothingAndRunsNothing) {
  auto be = backend::make_recording_backend(backend::make_cpu_backend(1));
  FloatBuffer x(8, 3.0f), out(8, 0.0f);
  auto graph = be->capture([&] {
    be->fill_zero(x.size() * sizeof(float), x.data());
    be->to_host(x.data(), x.size() * sizeof(float), out.data());
  });
  EXPECT_FALSE(graph);
  for (float v : x) EXPECT_EQ(v, 3.0f);
  // The backend is usable afterwards, directly.
  be->fill_zero(x.size() * sizeof(float), x.data());
  for (float v : x) EXPECT_EQ(v, 0.0f);
}

TEST(StepGraphs, TheCacheRecordsOncePerKeyAndReplaysAfterwards) {
  auto be = backend::make_recording_backend(backend::make_cpu_backend(1));
  FloatBuffer acc(4, 0.0f), one(4, 1.0f);
  int bodies = 0;
  auto body = [&] {
    ++bodies;
    be->add(4, acc.data(), one.data(), acc.data());
  };
  core::StepGraphCache cache;
  core::StepGraphKey a, b;
  a.rows = 32;
  b.rows = 16;
  cache.run(*be, a, true, body);  // the first of a shape runs directly
  EXPECT_EQ(bodies, 1);
  EXPECT_EQ(acc[0], 1.0f);
  cache.run(*be, a, true, body);  // the second is recorded, then launched
  EXPECT_EQ(bodies, 2);
  EXPECT_EQ(acc[0], 2.0f);
  cache.run(*be, a, true, body);  // replayed: body is not called again
  EXPECT_EQ(bodies, 2);
  EXPECT_EQ(acc[0], 3.0f);
  cache.run(*be, b, true, body);  // another shape: direct, then recorded anew
  cache.run(*be, b, true, body);
  EXPECT_EQ(bodies, 4);
  EXPECT_EQ(acc[0], 5.0f);
  EXPECT_EQ(cache.size(), 2u);
  cache.run(*be, a, false, body);  // recording not allowed: body runs directly
  EXPECT_EQ(bodies, 5);
  EXPECT_EQ(acc[0], 6.0f);

  // A backend that records nothing runs body each time.
  auto cpu = backend::make_cpu_backend(1);
  core::StepGraphCache direct;
  int runs = 0;
  for (int i = 0; i < 3; ++i) direct.run(*cpu, a, true, [&] { ++runs; });
  EXPECT_EQ(runs, 3);
}

// Whether be is recording: the recording backend refuses to wait for the device then.
bool is_recording(backend::Backend& be) {
  try {
    be.synchronize();
    return false;
  } catch (const Error& e) {
    return e.status() == Status::Misuse;
  }
}

// A body that throws while it is recorded (the second run of a key), as a step whose recording runs
// out of memory.
TEST(StepGraphs, ARecordingThatRunsOutOfMemoryThrowsItAndIsTriedAgainLater) {
  auto be = backend::make_recording_backend(backend::make_cpu_backend(1));
  core::StepGraphKey key;
  for (bool host_memory : {false, true}) {
    core::StepGraphCache cache;
    int direct = 0, recorded = 0;
    bool out_of_memory = true;
    auto body = [&] {
      if (!is_recording(*be)) {
        ++direct;
        return;
      }
      ++recorded;
      if (!out_of_memory) return;
      if (host_memory) throw std::bad_alloc();
      fail(Status::OutOfMemory, "no device memory left to record");
    };
    cache.run(*be, key, true, body);  // warm-up, directly
    EXPECT_EQ(test::status_of([&] { cache.run(*be, key, true, body); }), Status::OutOfMemory) << host_memory;
    EXPECT_EQ(direct, 1) << "nothing ran directly after the recording failed";
    EXPECT_EQ(recorded, 1);
    EXPECT_EQ(cache.failure(), "");
    out_of_memory = false;  // memory came back
    cache.run(*be, key, true, body);
    cache.run(*be, key, true, body);
    EXPECT_EQ(recorded, 2) << "recorded again, once";
    EXPECT_EQ(direct, 1) << "then replayed";
  }
}

TEST(StepGraphs, ARecordingThatFailsOtherwiseTurnsRecordingOffForGood) {
  auto be = backend::make_recording_backend(backend::make_cpu_backend(1));
  FloatBuffer acc(4, 0.0f), one(4, 1.0f);
  int bodies = 0;
  bool recording_fails = true;
  auto body = [&] {
    ++bodies;
    be->add(4, acc.data(), one.data(), acc.data());
    if (recording_fails) be->synchronize();  // refused while recording: a step cannot wait
  };
  core::StepGraphCache cache;
  core::StepGraphKey key;
  cache.run(*be, key, true, body);  // warm-up
  cache.run(*be, key, true, body);  // the recording fails: body runs directly instead
  EXPECT_EQ(acc[0], 2.0f) << "the failed recording ran nothing, the direct run once";
  EXPECT_NE(cache.failure().find("cannot call synchronize"), std::string::npos) << cache.failure();
  recording_fails = false;
  cache.run(*be, key, true, body);
  cache.run(*be, key, true, body);
  EXPECT_EQ(bodies, 5) << "direct every time: never recorded again";
  EXPECT_EQ(acc[0], 4.0f);
}

Dataset graph_data(int64_t n, uint32_t seed) {
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * 12), seed);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>((x[static_cast<size_t>(i * 12)] > 0) + (x[static_cast<size_t>(i * 12 + 1)] > 0));
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 12}, y.data(), DType::F32, {n});
  d.shuffle(n, 9);
  d.batch(48, false);  // 500 samples: 10 full batches and a short one of 20
  return d;
}

// The same, as 6x6 images of 2 channels: the pixel sums of the two channels' left halves decide.
Dataset image_data(int64_t n, uint32_t seed) {
  constexpr int64_t kPixels = 6 * 6 * 2;
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * kPixels), seed);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float left = 0, right = 0;
    for (int64_t p = 0; p < kPixels; ++p) (p % 12 < 6 ? left : right) += x[static_cast<size_t>(i * kPixels + p)];
    y[static_cast<size_t>(i)] = static_cast<float>((left > 0) + (right > 0));
  }
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 6, 6, 2}, y.data(), DType::F32, {n});
  d.shuffle(n, 9);
  d.batch(48, false);
  return d;
}

struct FitResult {
  std::vector<float> weights;
  std::vector<double> loss, val_loss;
};

// Mlp: dense layers with dropout and batch normalisation. ConvBn: Conv2D + BatchNormalization (the
// convolution's workspace and the statistics' state between a full batch, the short last one and
// validation), as a GPU runs it with cuDNN.
enum class Net { Mlp, ConvBn };

// Every value that changes from step to step: the dropout seed, the rate (a cosine decay per step and
// Adam's bias correction), the batch index, the last short batch, the EMA's first step, validation
// between epochs.
FitResult fit_on(const Strategy& strategy, OptimizerKind kind, int verbose = 0, Net net = Net::Mlp) {
  Model m = Model::sequential(strategy, net == Net::Mlp ? Shape{12} : Shape{6, 6, 2});
  if (net == Net::Mlp) {
    m.add_dense(24, Activation::Relu);
    m.add_dropout(0.25f);
  } else {
    m.add_conv2d(8, 3, 3, 1, Padding::Same, Activation::Relu);
  }
  LayerSpec bn;
  bn.kind = LayerKind::BatchNormalization;
  m.add(bn);
  if (net == Net::ConvBn) {
    m.add_conv2d(4, 3, 3, 2, Padding::Valid, Activation::Relu);
    m.add_flatten();
  }
  m.add_dense(3, Activation::Softmax);
  CompileOptions co;
  co.optimizer.kind = kind;
  co.optimizer.learning_rate = kind == OptimizerKind::Adam ? 0.01 : 0.1;
  co.optimizer.momentum = kind == OptimizerKind::Sgd ? 0.9 : 0.0;
  co.optimizer.use_ema = kind == OptimizerKind::Adam;
  co.seed = 17;
  m.compile(co);
  Dataset train = net == Net::Mlp ? graph_data(500, 1) : image_data(500, 1);
  Dataset val = net == Net::Mlp ? graph_data(130, 2) : image_data(130, 2);
  Callbacks cb;
  CosineDecay decay;
  decay.decay_steps = 25;
  decay.alpha = 0.1;
  cb.add_cosine_decay(decay);
  FitOptions fo;
  fo.epochs = 3;
  fo.verbose = verbose;
  fo.validation = &val;
  History h;
  EXPECT_EQ(m.fit(train, fo, &cb, &h), Status::Ok);
  FitResult r;
  r.weights = m.get_weights();
  r.loss = h.values().at("loss");
  r.val_loss = h.values().at("val_loss");
  return r;
}

FitResult fit_once(OptimizerKind kind, int replicas = 1, Net net = Net::Mlp) {
  return fit_on(Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu")), kind, 0, net);
}

// The step graphs recorded so far in this process (a replay that never happened must not pass).
int64_t graphs_recorded() { return config::test_hooks().step_graphs_recorded.load(); }

TEST(StepGraphs, TrainingWithRecordedStepsIsBitwiseTrainingWithout) {
  for (Net net : {Net::Mlp, Net::ConvBn})
    for (OptimizerKind kind : {OptimizerKind::Adam, OptimizerKind::Sgd}) {
      const std::string name = std::string(net == Net::Mlp ? "MLP" : "Conv2D+BN") + ", " +
                               (kind == OptimizerKind::Adam ? "Adam" : "SGD");
      FitResult direct, replayed;
      const int64_t before = graphs_recorded();
      {
        GraphSetting off("0");
        direct = fit_once(kind, 1, net);
      }
      EXPECT_EQ(graphs_recorded(), before) << name << ": nothing recorded with KX_STEP_GRAPHS=0";
      {
        GraphSetting emulate("emulate");
        replayed = fit_once(kind, 1, net);
      }
      // The full batch and the short last one, each recorded once and replayed after.
      EXPECT_EQ(graphs_recorded() - before, 2) << name;
      EXPECT_TRUE(replayed.weights == direct.weights) << name << ": " << test::relative_difference(replayed.weights, direct.weights);
      EXPECT_EQ(replayed.loss, direct.loss) << name;
      EXPECT_EQ(replayed.val_loss, direct.val_loss) << name;
      EXPECT_LT(direct.loss.back(), direct.loss.front()) << name << " learns";
    }
}

// A masked output's loss: the unmasked positions are counted and turned into the gradient's factor on
// the device, so a replayed step (its batch's count differing from the recorded one's) trains bitwise
// as a direct one. (Two CPU replicas' in-process sum is not recorded: one replica here.)
TEST(StepGraphs, AMaskedLossRecordedIsBitwiseDirect) {
  const int64_t n = 40, steps = 5;
  std::vector<float> ids(static_cast<size_t>(n * steps)), tags(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    const size_t i = k / steps, t = k % steps;
    ids[k] = t < 1 + (i * 7) % steps ? static_cast<float>(1 + (k * 5) % 8) : 0.0f;  // 1..5 kept steps
    tags[k] = static_cast<float>((k * 3) % 4 % 3);
  }
  std::vector<std::vector<float>> weights;
  std::vector<std::vector<double>> losses;
  const int64_t before = graphs_recorded();
  for (const char* setting : {"0", "emulate"}) {
    GraphSetting graphs(setting);
    Model m = Model::functional(Strategy::mirrored({"cpu"}), {steps}, "tokens");
    m.add_layer(R"({"class_name": "Embedding", "config": {"name": "emb", "input_dim": 9, "output_dim": 4, "mask_zero": true}})",
                {"tokens"});
    m.add_layer(R"({"class_name": "Dense", "config": {"name": "tags", "units": 3, "activation": "softmax"}})", {"emb"});
    CompileOptions co;
    co.seed = 3;
    m.compile(co);
    Dataset d = Dataset::from_arrays(ids.data(), DType::F32, {n, steps}, tags.data(), DType::F32, {n, steps});
    d.batch(8, false);
    FitOptions fo;
    fo.epochs = 2;
    History h;
    EXPECT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
    weights.push_back(m.get_weights());
    losses.push_back(h.values().at("loss"));
  }
  EXPECT_GT(graphs_recorded(), before) << "steps were replayed";
  EXPECT_TRUE(weights[0] == weights[1]) << test::relative_difference(weights[0], weights[1]);
  EXPECT_EQ(losses[0], losses[1]);
}

// A collective chosen by the strategy (the injection point a multi-worker strategy uses): the replicas'
// in-process sum, claiming that it can be recorded although it waits on the host. Recording the
// update part then fails, as a real recording may: with Status::Device, or out of memory.
class UnrecordableCollective final : public distribute::Collective {
 public:
  UnrecordableCollective(int replicas, Status failure)
      : inner_(distribute::make_in_process_collective(replicas)), failure_(failure) {}
  void all_reduce_sum(int replica, backend::Backend& be, float* buffer, int64_t n) override {
    if (is_recording(be)) fail(failure_, "this collective cannot be recorded");
    inner_->all_reduce_sum(replica, be, buffer, n);
  }
  bool capturable() const override { return true; }

 private:
  std::unique_ptr<distribute::Collective> inner_;
  Status failure_;
};

class UnrecordableCollectives final : public distribute::CollectiveFactory {
 public:
  explicit UnrecordableCollectives(Status failure) : failure_(failure) {}
  std::unique_ptr<distribute::Collective> make(const std::vector<Device>& devices,
                                               const std::vector<backend::Backend*>& replicas) const override {
    ++made;
    EXPECT_EQ(devices.size(), replicas.size());
    return std::make_unique<UnrecordableCollective>(static_cast<int>(replicas.size()), failure_);
  }
  mutable int made = 0;

 private:
  Status failure_;
};

Strategy two_cpu_replicas(StepGraphs graphs, std::shared_ptr<const distribute::CollectiveFactory> collectives) {
  Strategy s = Strategy::mirrored({"cpu", "cpu"});
  s.set_step_graphs(graphs);
  s.set_collective_factory(std::move(collectives));
  return s;
}

TEST(StepGraphs, AFailedRecordingFallsBackToDirectStepsSaysSoOnceAndTrainsTheSame) {
  GraphSetting unset(nullptr);  // the strategy's option decides
  const auto collectives = std::make_shared<UnrecordableCollectives>(Status::Device);
  const FitResult direct = fit_on(two_cpu_replicas(StepGraphs::Off, collectives), OptimizerKind::Adam);
  testing::internal::CaptureStdout();
  const FitResult fallen_back = fit_on(two_cpu_replicas(StepGraphs::Emulate, collectives), OptimizerKind::Adam, 1);
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(collectives->made, 2) << "each model asks the strategy's factory for its collective";
  EXPECT_TRUE(fallen_back.weights == direct.weights)
      << test::relative_difference(fallen_back.weights, direct.weights);
  EXPECT_EQ(fallen_back.loss, direct.loss);
  EXPECT_EQ(fallen_back.val_loss, direct.val_loss);
  const std::string notice = "Recording the training step failed (this collective cannot be recorded)";
  const size_t at = printed.find(notice);
  EXPECT_NE(at, std::string::npos) << printed;
  EXPECT_EQ(printed.find(notice, at + 1), std::string::npos) << "said once:\n" << printed;

  // Silent at verbose 0.
  testing::internal::CaptureStdout();
  fit_on(two_cpu_replicas(StepGraphs::Emulate, collectives), OptimizerKind::Adam, 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
}

TEST(StepGraphs, ARecordingOutOfMemoryFailsTheFitWithOutOfMemory) {
  GraphSetting unset(nullptr);
  const auto collectives = std::make_shared<UnrecordableCollectives>(Status::OutOfMemory);
  EXPECT_EQ(test::status_of([&] { fit_on(two_cpu_replicas(StepGraphs::Emulate, collectives), OptimizerKind::Sgd); }),
            Status::OutOfMemory);
}

TEST(StepGraphs, TheStrategyOptionRecordsStepsAndTheEnvironmentOverridesIt) {
  GraphSetting unset(nullptr);
  const Strategy one = Strategy::mirrored({"cpu"});
  Strategy emulate = one, off = one;
  emulate.set_step_graphs(StepGraphs::Emulate);
  off.set_step_graphs(StepGraphs::Off);
  EXPECT_EQ(emulate.effective_step_graphs(), StepGraphs::Emulate);
  const FitResult direct = fit_on(off, OptimizerKind::Adam), replayed = fit_on(emulate, OptimizerKind::Adam);
  EXPECT_TRUE(replayed.weights == direct.weights);
  GraphSetting env_off("0");
  EXPECT_EQ(emulate.effective_step_graphs(), StepGraphs::Off);
}

// KX_DATA_STREAMING=always feeds every batch through the rings, as a dataset too large for a GPU's
// memory is: gathered on the host into a slot, copied, gathered again on the device from the slot.
class StreamingSetting {
 public:
  explicit StreamingSetting(bool on) {
    if (on)
      setenv("KX_DATA_STREAMING", "always", 1);
    else
      unsetenv("KX_DATA_STREAMING");
  }
  ~StreamingSetting() { unsetenv("KX_DATA_STREAMING"); }
};

TEST(DataStreaming, StreamedDatasetsTrainBitwiseAsCachedOnes) {
  for (int replicas : {1, 2})
    for (const char* graphs : {"0", "emulate"}) {
      GraphSetting g(graphs);
      FitResult cached, streamed;
      {
        StreamingSetting off(false);
        cached = fit_once(OptimizerKind::Adam, replicas);
      }
      {
        StreamingSetting on(true);
        streamed = fit_once(OptimizerKind::Adam, replicas);
      }
      const std::string what = std::to_string(replicas) + " replicas, KX_STEP_GRAPHS=" + graphs;
      EXPECT_TRUE(streamed.weights == cached.weights) << what;
      EXPECT_EQ(streamed.loss, cached.loss) << what;
      EXPECT_EQ(streamed.val_loss, cached.val_loss) << what;
    }
}

}  // namespace
}  // namespace kx
