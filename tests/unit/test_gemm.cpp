// GEMM kernels against a float64 reference over all transpose cases, edge sizes and epilogues.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "backend/cpu/gemm.hpp"
#include "kx/error.hpp"
#include "reference.hpp"

namespace kx {
namespace {

using backend::Trans;

void check_gemm(backend::Backend& be, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float beta, bool bias,
                bool relu, uint32_t seed) {
  const int64_t lda = (ta == Trans::No ? K : M) + 3;  // padded leading dimensions
  const int64_t ldb = (tb == Trans::No ? N : K) + 2;
  const int64_t ldc = N + 1;
  const auto A = test::random_floats((ta == Trans::No ? M : K) * lda, seed);
  const auto B = test::random_floats((tb == Trans::No ? K : N) * ldb, seed + 1);
  const auto b = test::random_floats(N, seed + 2);
  auto C = test::random_floats(M * ldc, seed + 3);
  std::vector<double> want(M * ldc);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = ta == Trans::No ? A[i * lda + k] : A[k * lda + i];
        const double bb = tb == Trans::No ? B[k * ldb + j] : B[j * ldb + k];
        s += a * bb;
      }
      s += beta * C[i * ldc + j] + (bias ? b[j] : 0.0);
      want[i * ldc + j] = relu ? std::max(s, 0.0) : s;
    }
  backend::Epilogue ep{bias ? b.data() : nullptr, relu ? Activation::Relu : Activation::None};
  be.gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, ep);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      ASSERT_NEAR(C[i * ldc + j], want[i * ldc + j], 2e-5 * std::max<double>(1.0, std::sqrt(double(K))))
          << be.gemm_kernel_name() << " ta=" << (ta == Trans::Yes) << " tb=" << (tb == Trans::Yes) << " M=" << M
          << " N=" << N << " K=" << K << " at (" << i << "," << j << ")";
}

void check_all_shapes(CpuGemm choice) {
  std::unique_ptr<backend::Backend> be;
  try {
    be = backend::make_cpu_backend(2, choice);
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  uint32_t seed = 10;
  for (Trans ta : {Trans::No, Trans::Yes})
    for (Trans tb : {Trans::No, Trans::Yes})
      for (int64_t M : {1, 7, 8, 9, 33})
        for (int64_t N : {1, 10, 16, 17, 32, 45, 48, 49})
          for (int64_t K : {1, 5, 31, 32, 70}) {
            check_gemm(*be, ta, tb, M, N, K, 0.0f, false, false, seed++);
            if (::testing::Test::HasFatalFailure()) return;
          }
  // Epilogues and accumulation on a few shapes, including ones large enough to run in parallel.
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{32, 256, 784}, {13, 50, 9}, {256, 10, 32}, {300, 40, 64}}) {
    check_gemm(*be, Trans::No, Trans::No, M, N, K, 1.0f, true, true, seed++);
    check_gemm(*be, Trans::Yes, Trans::No, K, N, M, 0.5f, true, false, seed++);
    check_gemm(*be, Trans::No, Trans::Yes, M, K, N, 0.0f, false, true, seed++);
  }
}

TEST(Gemm, BuiltinKernelMatchesFloat64) { check_all_shapes(CpuGemm::Builtin); }

// A long K is cut into passes (a C to revisit) or, longer still over a small C, into slices summed
// afterwards: the convolution weight gradients' shapes. Both must match float64 and not depend on the
// thread count.
TEST(Gemm, LongProductsMatchFloat64AndDoNotDependOnTheThreadCount) {
  const auto one = backend::make_cpu_backend(1, CpuGemm::Builtin);
  const auto two = backend::make_cpu_backend(2, CpuGemm::Builtin);
  uint32_t seed = 500;
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{40, 64, 3000}, {9, 32, 9000}, {17, 5, 8193}, {50, 100, 4500}}) {
    check_gemm(*two, Trans::Yes, Trans::No, M, N, K, 0.0f, false, false, seed);
    check_gemm(*two, Trans::No, Trans::No, M, N, K, 1.0f, true, true, seed + 1);
    const auto A = test::random_floats(K * M, seed + 2), B = test::random_floats(K * N, seed + 3);
    std::vector<float> c1(M * N), c2(M * N);
    one->gemm(Trans::Yes, Trans::No, M, N, K, A.data(), M, B.data(), N, 0.0f, c1.data(), N, {});
    two->gemm(Trans::Yes, Trans::No, M, N, K, A.data(), M, B.data(), N, 0.0f, c2.data(), N, {});
    EXPECT_EQ(c1, c2) << M << "x" << N << "x" << K;
    seed += 4;
  }
}
// The weight-gradient GEMM's bias gradient: the column sums of B, beside the product, on every kernel.
TEST(Gemm, TheBiasGradientBesideAProductIsTheColumnSumOfB) {
  for (CpuGemm kind : {CpuGemm::Builtin, CpuGemm::Auto}) {
    const auto be = backend::make_cpu_backend(2, kind);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{784, 128, 32}, {9, 32, 5000}, {3, 5, 1}, {4, 6, 0}}) {
      const auto A = test::random_floats(K * M, 600 + M), B = test::random_floats(K * N, 700 + N);
      std::vector<float> C(M * N, 9.0f), db(N, 9.0f), plain(M * N);
      backend::Epilogue ep;
      ep.bias_grad = db.data();
      be->gemm(Trans::Yes, Trans::No, M, N, K, A.data(), M, B.data(), N, 0.0f, C.data(), N, ep);
      be->gemm(Trans::Yes, Trans::No, M, N, K, A.data(), M, B.data(), N, 0.0f, plain.data(), N, {});
      EXPECT_EQ(C, plain) << "the product is unchanged";
      test::Vec want(N, 0.0);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) want[n] += B[k * N + n];
      EXPECT_EQ(test::first_mismatch(db, want, N, 1e-5 * std::sqrt(double(K + 1))), -1) << M << "x" << N << "x" << K;
    }
    // Only for what it is meant for: B transposed is a misuse.
    std::vector<float> x(16, 1.0f), y(16);
    backend::Epilogue ep;
    ep.bias_grad = y.data();
    EXPECT_THROW(be->gemm(Trans::Yes, Trans::Yes, 4, 4, 4, x.data(), 4, x.data(), 4, 0.0f, y.data(), 4, ep), Error);
  }
}

TEST(Gemm, CblasMatchesFloat64WhenBuiltWithIt) { check_all_shapes(CpuGemm::Blas); }

// A SIMD tile kernel against the portable loops on every tile shape the driver hands out (the NEON
// kernel cuts a tile into column chunks of 12, 8 and 4 and leaves the rest to the portable loops; the
// AVX2 one into chunks of 4 rows by 24, 16 or 8 columns, the last vector masked).
void check_tile_kernel(backend::cpu::TileKernel fast) {
  for (int rows = 1; rows <= backend::cpu::kTileRows; ++rows)
    for (int cols : {1, 3, 4, 5, 8, 9, 11, 12, 13, 16, 17, 20, 24, 25, 27, 28, 31, 32, 33, 40, 45, 47, 48})
      for (float beta : {0.0f, 1.0f}) {
        // A read along its rows (a forward product), and down its columns (a weight gradient's A^T),
        // with strides wider than the tile.
        const bool transposed = beta != 0.0f;
        const int64_t K = 23, lda = transposed ? 11 : K + 3, ldb = 56, ldc = 56;
        const auto A = test::random_floats(transposed ? K * lda : rows * lda, rows * 100 + cols);
        const auto B = test::random_floats(K * ldb, rows * 100 + cols + 1);
        const auto bias = test::random_floats(backend::cpu::kTileCols, 3);
        auto C1 = test::random_floats(rows * ldc, 4), C2 = C1;
        backend::cpu::Tile t{K, A.data(), transposed ? 1 : lda, transposed ? lda : 1, B.data(), ldb, C1.data(), ldc,
                              rows, cols, beta, bias.data(), true, backend::Rounding::None};
        backend::cpu::tile_portable(t);
        t.C = C2.data();
        fast(t);
        for (size_t i = 0; i < C1.size(); ++i)
          ASSERT_NEAR(C1[i], C2[i], 1e-5) << rows << "x" << cols << " beta " << beta << " at " << i;
      }
}

TEST(Gemm, PortableTileKernelMatchesAvx512TileKernel) {
  const backend::cpu::TileKernel fast = backend::cpu::tile_avx512();
  if (!fast) GTEST_SKIP() << "no AVX-512 on this CPU";
  check_tile_kernel(fast);
}

TEST(Gemm, PortableTileKernelMatchesAvx2TileKernel) {
  const backend::cpu::TileKernel fast = backend::cpu::tile_avx2();
  if (!fast) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
  check_tile_kernel(fast);
}

TEST(Gemm, PortableTileKernelMatchesNeonTileKernel) {
  const backend::cpu::TileKernel fast = backend::cpu::tile_neon();
  if (!fast) GTEST_SKIP() << "not an AArch64 build";
  check_tile_kernel(fast);
}

// On AArch64 the built-in GEMM is the NEON kernel (the float64 checks above then test it).
TEST(Gemm, TheBuiltinKernelIsNeonOnAarch64) {
#if defined(__aarch64__)
  EXPECT_EQ(backend::make_cpu_backend(1, CpuGemm::Builtin)->gemm_kernel_name().rfind("builtin neon", 0), 0u);
#else
  GTEST_SKIP() << "not an AArch64 build";
#endif
}

}  // namespace
}  // namespace kx
