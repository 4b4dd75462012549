// A NaN in the input reaches the loss as in Keras (relu(NaN) is NaN, fused into a GEMM or not), so
// TerminateOnNaN stops at the batch that holds it instead of the weights turning NaN unnoticed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "kx/model.hpp"
#include "reference.hpp"

namespace kx {
namespace {

constexpr int64_t kIn = 6, kSamples = 64, kBatch = 8;

Model relu_model(CpuGemm gemm) {
  Strategy s = Strategy::mirrored({"cpu"});
  s.set_cpu_gemm(gemm);
  Model m = Model::sequential(s, {kIn});
  m.add_dense(16, Activation::Relu);
  m.add_layer(R"({"class_name": "ReLU", "config": {}})");
  m.add_dense(3, Activation::Softmax);
  CompileOptions o;
  o.seed = 3;
  m.compile(o);
  return m;
}

// The GEMM of the parameter, skipped where this build has none such (no CBLAS, as the aarch64 build).
class NanPropagation : public ::testing::TestWithParam<CpuGemm> {
 protected:
  void SetUp() override {
    try {
      relu_model(GetParam());
    } catch (const Error& e) {
      if (e.status() == Status::Unsupported) GTEST_SKIP() << e.what();
      throw;
    }
  }
};

TEST_P(NanPropagation, ReluKeepsANanInTheForwardPass) {
  Model m = relu_model(GetParam());
  std::vector<float> x = test::random_floats(2 * kIn, 5);
  x[kIn + 2] = std::numeric_limits<float>::quiet_NaN();  // the second sample
  const std::vector<float> y = m.predict(x.data(), 2);
  for (int c = 0; c < 3; ++c) {
    EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(c)])) << "the first sample is clean";
    EXPECT_TRUE(std::isnan(y[static_cast<size_t>(3 + c)])) << "output " << c << " of the NaN sample is " << y[3 + c];
  }
}

TEST_P(NanPropagation, TerminateOnNanStopsAtTheBatchThatHoldsIt) {
  Model m = relu_model(GetParam());
  std::vector<float> x = test::random_floats(kSamples * kIn, 9);
  std::vector<float> y(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 3);
  const int64_t bad_sample = 3 * kBatch + 1;  // in the fourth batch
  x[static_cast<size_t>(bad_sample * kIn)] = std::numeric_limits<float>::quiet_NaN();
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kSamples, kIn}, y.data(), DType::F32, {kSamples});
  d.batch(kBatch, false);
  Callbacks cb;
  cb.add_terminate_on_nan();
  int64_t last_batch = 0;
  cb.add([&](const Event& e) {
    if (e.kind == EventKind::BatchEnd) last_batch = e.step;
    return false;
  });
  FitOptions o;
  std::string message;
  try {
    m.fit(d, o, &cb, nullptr);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Diverged);
    message = e.what();
  }
  EXPECT_NE(message.find("batch 4"), std::string::npos) << message;
  EXPECT_EQ(last_batch, 3) << "no batch after the NaN one ran its callbacks";
}

// Fits m on d with a checkpoint after every batch (and `cb`'s other callbacks) and expects the fit to
// end in KX_E_DIVERGED saying the checkpoint of `refused_step` was not written, with `files`
// checkpoints left, every one of them resuming finite weights.
void expect_only_finite_checkpoints(Model& m, Dataset& d, Callbacks& cb, const std::string& name, int refused_step,
                                    int files) {
  const std::string dir = ::testing::TempDir() + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  cb.add_model_checkpoint(dir + "/step-{step}.kx", 1, 0);
  std::string message;
  try {
    m.fit(d, FitOptions{}, &cb, nullptr);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Diverged);
    message = e.what();
  }
  EXPECT_NE(message.find("step-" + std::to_string(refused_step) + ".kx was not written"), std::string::npos) << message;
  int found = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    ++found;
    Model resumed = Model::load(Strategy::mirrored({"cpu"}), f.path().string());
    for (float w : resumed.get_weights()) ASSERT_TRUE(std::isfinite(w)) << f.path();
  }
  EXPECT_EQ(found, files);
  std::filesystem::remove_all(dir);
}

// Without TerminateOnNaN the update of the NaN batch makes the weights NaN: the checkpoint after it is
// refused (KX_E_DIVERGED naming it), and every checkpoint on disk holds finite weights to resume from.
TEST(NanCheckpoints, ANonFiniteStateIsNeverWritten) {
  Model m = relu_model(CpuGemm::Auto);
  std::vector<float> x = test::random_floats(kSamples * kIn, 9);
  std::vector<float> y(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 3);
  x[static_cast<size_t>((3 * kBatch + 1) * kIn)] = std::numeric_limits<float>::quiet_NaN();  // batch 4
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kSamples, kIn}, y.data(), DType::F32, {kSamples});
  d.batch(kBatch, false);
  Callbacks cb;
  expect_only_finite_checkpoints(m, d, cb, "kx-nan-checkpoints", 4, 3);
}

// An inf input saturates tanh and sigmoid, so the loss stays finite and TerminateOnNaN has nothing to
// see, but the kernel's gradient (inf times the error) makes the weights non-finite. The checkpoint of
// that batch is refused and the message's promise holds: every file on disk resumes finite weights.
class InfThroughSaturation : public ::testing::TestWithParam<Activation> {};

TEST_P(InfThroughSaturation, TheCheckpointOfTheBadUpdateIsRefused) {
  Strategy s = Strategy::mirrored({"cpu"});
  Model m = Model::sequential(s, {kIn});
  m.add_dense(16, GetParam());
  m.add_dense(3, Activation::Softmax);
  CompileOptions co;
  co.seed = 5;
  m.compile(co);
  std::vector<float> x = test::random_floats(kSamples * kIn, 11);
  std::vector<float> y(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 3);
  x[static_cast<size_t>((2 * kBatch + 3) * kIn + 1)] = std::numeric_limits<float>::infinity();  // batch 3
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kSamples, kIn}, y.data(), DType::F32, {kSamples});
  d.batch(kBatch, false);
  Callbacks cb;
  cb.add_terminate_on_nan();
  expect_only_finite_checkpoints(m, d, cb, "kx-inf-checkpoints", 3, 2);  // batches 1 and 2 were written
}

INSTANTIATE_TEST_SUITE_P(Saturating, InfThroughSaturation, ::testing::Values(Activation::Tanh, Activation::Sigmoid),
                         [](const auto& info) { return info.param == Activation::Tanh ? "Tanh" : "Sigmoid"; });

INSTANTIATE_TEST_SUITE_P(Gemms, NanPropagation, ::testing::Values(CpuGemm::Builtin, CpuGemm::Blas),
                         [](const auto& info) { return info.param == CpuGemm::Builtin ? "Builtin" : "Blas"; });

}  // namespace
}  // namespace kx
