// The CUDA backend's memory and lifetime on a device: steps recorded as CUDA graphs and replayed
// against steps run kernel by kernel (with the graphs counted, so that a recording that fell back to
// direct steps cannot pass), convolutions whose cuDNN workspace grows under recorded graphs, models on
// two GPUs destroyed with NCCL operations in their graphs, and a GEMM of an empty sum. Skipped
// without a GPU (the two-GPU test without two GPUs and NCCL).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_module.hpp"
#include "config/test_hooks.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"
#include "require_gpu.hpp"

namespace kx {
namespace {

using backend::Trans;

// The step graphs recorded so far in this process.
int64_t graphs_recorded() { return config::test_hooks().step_graphs_recorded.load(); }

// Runs f on a thread of its own; when it has not returned after `limit`, the test program fails at
// once: a hang (ncclCommDestroy waiting for graphs) must not hold a short device loan until ctest's
// timeout.
template <class F>
void within(std::chrono::seconds limit, const char* what, F f) {
  std::future<void> done = std::async(std::launch::async, std::move(f));
  if (done.wait_for(limit) == std::future_status::timeout) {
    std::fprintf(stderr, "FAILED: %s did not return within %lld s\n", what, static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
  done.get();
}

// Mlp: dense layers with dropout and batch normalisation. ConvBn: two Conv2D (cuDNN where it has a
// deterministic algorithm) around a BatchNormalization: a short last batch and validation between
// epochs plan convolutions of other row counts, whose cuDNN workspace may outgrow the one the
// full-batch graph was recorded with.
enum class Net { Mlp, ConvBn };

// The step recorded as a CUDA graph and replayed gives the weights of the step run kernel by kernel:
// every value that changes between steps (rate, dropout seed, batch index, a short last batch, the
// EMA's first step, validation in between) reaches the replay.
TEST(CudaTraining, RecordedStepsEqualDirectStepsBitwise) {
  REQUIRE_GPU();
  for (Net net : {Net::Mlp, Net::ConvBn}) {
    const Shape sample = net == Net::Mlp ? Shape{20} : Shape{8, 8, 3};
    const int64_t floats = net == Net::Mlp ? 20 : 8 * 8 * 3;
    const std::vector<float> x = test::random_floats(static_cast<size_t>(500 * floats), 8),
                             vx = test::random_floats(static_cast<size_t>(130 * floats), 9);
    std::vector<float> y(500), vy(130);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 7) % 5);
    for (size_t i = 0; i < vy.size(); ++i) vy[i] = static_cast<float>((i * 3) % 5);
    auto run = [&](const char* graphs) {
      setenv("KX_STEP_GRAPHS", graphs, 1);
      Model m = Model::sequential(Strategy::mirrored({"cuda:0"}), sample);
      if (net == Net::Mlp) {
        m.add_dense(64, Activation::Relu);
        m.add_dropout(0.2f);
      } else {
        m.add_conv2d(8, 3, 3, 1, Padding::Same, Activation::Relu);
      }
      LayerSpec bn;
      bn.kind = LayerKind::BatchNormalization;
      m.add(bn);
      if (net == Net::ConvBn) {
        m.add_conv2d(8, 3, 3, 2, Padding::Valid, Activation::Relu);
        m.add_flatten();
      }
      m.add_dense(5, Activation::Softmax);
      CompileOptions co;
      co.seed = 6;
      co.optimizer.use_ema = true;
      m.compile(co);
      unsetenv("KX_STEP_GRAPHS");
      Shape data_shape{500}, val_shape{130};
      data_shape.insert(data_shape.end(), sample.begin(), sample.end());
      val_shape.insert(val_shape.end(), sample.begin(), sample.end());
      Dataset d = Dataset::from_arrays(x.data(), DType::F32, data_shape, y.data(), DType::F32, {500, 1});
      Dataset v = Dataset::from_arrays(vx.data(), DType::F32, val_shape, vy.data(), DType::F32, {130, 1});
      d.shuffle(500, 2);
      d.batch(48, false);  // 10 full batches and a short one of 20
      Callbacks cb;
      CosineDecay decay;
      decay.decay_steps = 25;
      cb.add_cosine_decay(decay);
      FitOptions fo;
      fo.epochs = 3;
      fo.validation = &v;
      EXPECT_EQ(m.fit(d, fo, &cb, nullptr), Status::Ok);
      return m.get_weights();
    };
    const char* name = net == Net::Mlp ? "MLP" : "Conv2D+BN";
    const int64_t before = graphs_recorded();
    const std::vector<float> direct = run("0");
    EXPECT_EQ(graphs_recorded(), before) << name << ": nothing recorded with KX_STEP_GRAPHS=0";
    const std::vector<float> replayed = run("1");
    // The full batch and the short last one at least; fewer means steps ran directly.
    EXPECT_GE(graphs_recorded() - before, 2) << name << ": the steps were not recorded";
    EXPECT_EQ(replayed, direct) << name << ": " << test::relative_difference(replayed, direct);
  }
}

// Models on two GPUs sum their gradients with NCCL, whose all-reduce is recorded into the update
// step's graph; ncclCommDestroy waits until no graph holds the communicator's operations. A model is
// destroyed (its graphs before its collective), and another is compiled on the same GPUs and trains.
TEST(CudaTraining, TwoGpuModelsAreDestroyedAndCompiledAgain) {
  REQUIRE_GPU();
  if (device_count(DeviceKind::Cuda) < 2) GTEST_SKIP() << "needs two GPUs";
  if (const std::string why = backend::CudaModule::load().nccl_unavailable(); !why.empty())
    GTEST_SKIP() << "no NCCL: " << why;
  const std::vector<float> x = test::random_floats(512 * 20, 3);
  std::vector<float> y(512);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 7) % 5);
  for (int round = 0; round < 2; ++round) {
    auto m = std::make_unique<Model>(Model::sequential(Strategy::mirrored({"cuda:0", "cuda:1"}), {20}));
    m->add_dense(64, Activation::Relu);
    m->add_dense(5, Activation::Softmax);
    CompileOptions co;
    co.seed = 4;
    m->compile(co);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {512, 20}, y.data(), DType::F32, {512, 1});
    d.batch(64, false);
    FitOptions fo;
    fo.epochs = 2;
    History h;
    const int64_t before = graphs_recorded();
    EXPECT_EQ(m->fit(d, fo, nullptr, &h), Status::Ok) << "round " << round;
    EXPECT_GT(graphs_recorded() - before, 0) << "round " << round << ": no step was recorded with NCCL in it";
    const std::vector<double>& loss = h.values().at("loss");
    EXPECT_LT(loss.back(), loss.front()) << "round " << round;
    within(std::chrono::seconds(120), "destroying a model whose recorded steps hold NCCL operations",
           [&] { m.reset(); });
  }
}

// K = 0: C = beta C, then the epilogue, as the CPU computes it (cuBLASLt is not asked).
TEST(CudaKernels, GemmOfAnEmptySumIsBetaC) {
  REQUIRE_GPU();
  const std::unique_ptr<backend::Backend> cpu = backend::make_cpu_backend(1);
  const std::unique_ptr<backend::Backend> gpu = backend::CudaModule::load().create_backend(0, {});
  constexpr int64_t M = 9, N = 7;
  const std::vector<float> c0 = test::random_floats(M * N, 5), bias = test::random_floats(N, 6), ab(4, 1.0f);
  const auto up = [&](const std::vector<float>& v) {
    backend::DeviceBuffer b = gpu->allocate(v.size() * sizeof(float));
    gpu->to_device(v.data(), v.size() * sizeof(float), b.data());
    return b;
  };
  const backend::DeviceBuffer d_bias = up(bias), d_ab = up(ab);
  for (float beta : {0.0f, 1.0f, 0.5f, -3.0f})
    for (bool epilogue : {false, true}) {
      backend::Epilogue cpu_ep, gpu_ep;
      if (epilogue) {
        cpu_ep = {bias.data(), Activation::Relu};
        gpu_ep = {d_bias.data(), Activation::Relu};
      }
      std::vector<float> want = c0, got(c0.size());
      cpu->gemm(Trans::No, Trans::No, M, N, 0, ab.data(), 1, ab.data(), N, beta, want.data(), N, cpu_ep);
      const backend::DeviceBuffer c = up(c0);
      gpu->gemm(Trans::No, Trans::No, M, N, 0, d_ab.data(), 1, d_ab.data(), N, beta, c.data(), N, gpu_ep);
      gpu->to_host(c.data(), c.bytes(), got.data());
      EXPECT_EQ(got, want) << "beta " << beta << (epilogue ? " with bias and ReLU" : "");
    }
}

}  // namespace
}  // namespace kx
