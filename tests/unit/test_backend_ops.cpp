// The op table (tests/ops/op_cases.hpp) on the CPU, one test per backend operation: each case run
// directly and recorded by the recording backend (capture, then launch) on a fresh CPU backend ends
// bit for bit the same, and its outputs pass the case's own checks. tests/cuda runs the same table
// against the CUDA backend.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "backend/recording_backend.hpp"
#include "ops/op_cases.hpp"

namespace kx::test::ops {
namespace {

constexpr int kThreads = 2;

class BackendOps : public ::testing::TestWithParam<OpCase> {};

// The case run directly on a fresh CPU backend.
OpResult run_directly(const OpCase& c, uint32_t seed) {
  const std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(kThreads);
  OpIo io(*be, seed);
  c.setup(io)(*be);
  return io.finish();
}

TEST_P(BackendOps, RecordedRunEqualsTheDirectRunBitwise) {
  const OpCase& c = GetParam();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  const OpResult direct = run_directly(c, seed);
  EXPECT_EQ(sanity_problems(c, direct), "");

  const std::unique_ptr<backend::Backend> recorder =
      backend::make_recording_backend(backend::make_cpu_backend(kThreads));
  OpIo io(*recorder, seed);
  const OpCall call = c.setup(io);
  const std::unique_ptr<backend::StepGraph> graph = recorder->capture([&] { call(*recorder); });
  ASSERT_NE(graph, nullptr) << "the recorder could not record the case";
  EXPECT_EQ(changes_since_upload(io.read()), "") << "recording runs nothing";
  graph->launch();
  const OpResult recorded = io.finish();
  EXPECT_EQ(compare_results(c, recorded, direct, /*exact=*/true), "");
  EXPECT_EQ(recorded.used_reference, direct.used_reference);
}

// A native-only operation the CPU lacks (a convolution) runs its reference from other kernels: the
// case must not call what the backend says it cannot run.
TEST_P(BackendOps, RunsItsReferenceWhereTheCpuLacksTheOperation) {
  const OpCase& c = GetParam();
  const bool cpu_has_it = backend::make_cpu_backend(1)->supports({c.op});
  EXPECT_EQ(run_directly(c, 1).used_reference, !cpu_has_it);
}

// The sanity check has teeth for every case: set up but never run, the case fails it (nothing written,
// or no loss summed).
TEST_P(BackendOps, SanityCheckFailsACaseThatRunsNothing) {
  const OpCase& c = GetParam();
  const std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  OpIo io(*be, 2);
  (void)c.setup(io);
  EXPECT_NE(sanity_problems(c, io.finish()), "");
}

INSTANTIATE_TEST_SUITE_P(Cpu, BackendOps, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.name); });

// compare_results reports one flipped bit when exact, and takes it within a tolerance otherwise.
TEST(BackendOpsComparison, ExactComparisonSeesOneBitAndToleranceAbsorbsIt) {
  const OpCase& gemm = op_cases()[static_cast<size_t>(backend::Op::gemm)];
  const std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  OpIo io(*be, 3);
  gemm.setup(io)(*be);
  const OpResult want = io.finish();
  OpResult got = want;
  ASSERT_FALSE(got.buffers.empty());
  got.buffers.front().after[0] ^= std::byte{1};  // the lowest mantissa bit of the first value
  EXPECT_NE(compare_results(gemm, got, want, /*exact=*/true), "");
  EXPECT_EQ(compare_results(gemm, got, want, /*exact=*/false), "");
  got.loss_sums.loss = 1;
  EXPECT_NE(compare_results(gemm, got, want, /*exact=*/false), "");
}

}  // namespace
}  // namespace kx::test::ops
