// The op table (tests/ops/op_cases.hpp) on the CUDA backend against the CPU, one test per backend
// operation: the same case, from the same seed, on both, within the case's tolerance (TF32 off, so
// float32 GEMMs are float32 on both). Skipped without a GPU. Where the GPU runs a convolution natively
// (cuDNN) the CPU side runs the case's reference from im2col and GEMMs.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "kx/kx.hpp"
#include "ops/op_cases.hpp"
#include "require_gpu.hpp"

namespace kx::test::ops {
namespace {

class BackendOps : public ::testing::TestWithParam<OpCase> {};

// The case run on be from seed.
OpResult run_on(backend::Backend& be, const OpCase& c, uint32_t seed) {
  OpIo io(be, seed);
  c.setup(io)(be);
  return io.finish();
}

TEST_P(BackendOps, CudaMatchesTheCpuWithinTheCaseTolerance) {
  REQUIRE_GPU();
  const OpCase& c = GetParam();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  const std::unique_ptr<backend::Backend> cpu = backend::make_cpu_backend(1);
  // cuDNN as a strategy would have it (KX_CUDNN=0 turns it off, and the convolutions use their reference).
  const std::unique_ptr<backend::Backend> gpu = backend::make_backend(
      Device{DeviceKind::Cuda, 0}, {.tf32 = false, .cudnn = Strategy::default_strategy().effective_cudnn()});
  gpu->set_tf32(false);
  const OpResult want = run_on(*cpu, c, seed);
  const OpResult got = run_on(*gpu, c, seed);
  if (got.used_reference != want.used_reference)
    std::printf("%s: %s runs it natively, the other its reference\n", c.name, got.used_reference ? "the CPU" : "CUDA");
  EXPECT_EQ(sanity_problems(c, got), "");
  EXPECT_EQ(compare_results(c, got, want, /*exact=*/false), "");
}

INSTANTIATE_TEST_SUITE_P(Cuda, BackendOps, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kx::test::ops
