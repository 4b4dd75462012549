// The CUDA backend against the CPU backend, kernel by kernel on fresh random inputs (float32 within a
// relative 1e-5, TF32 GEMMs within 2e-3), and whole fits on cuda:0. Without a GPU every test that
// needs one is skipped; the module itself must still load wherever it was built.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_module.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"
#include "require_gpu.hpp"

namespace kx {
namespace {

using backend::Backend;
using backend::DeviceBuffer;
using backend::Trans;

// Fresh inputs on every run: the seed comes from the clock unless KX_TEST_SEED fixes it, and a
// failure prints it.
uint32_t fresh_seed() {
  if (const char* s = std::getenv("KX_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

// The CPU and the CUDA backend side by side, with host <-> device helpers.
struct Pair {
  std::unique_ptr<Backend> cpu = backend::make_cpu_backend(1);
  // cuDNN as a strategy would have it (KX_CUDNN=0 turns it off).
  std::unique_ptr<Backend> gpu =
      backend::CudaModule::load().create_backend(0, {.cudnn = Strategy::default_strategy().effective_cudnn()});
  std::vector<DeviceBuffer> keep;

  Pair() { gpu->set_tf32(false); }
  // A device copy of v, kept until the pair goes.
  template <class T>
  T* up(const std::vector<T>& v) {
    keep.push_back(gpu->allocate(v.size() * sizeof(T)));
    gpu->to_device(v.data(), v.size() * sizeof(T), keep.back().data());
    return keep.back().data<T>();
  }
  std::vector<float> down(const float* p, size_t n) {
    std::vector<float> v(n);
    gpu->to_host(p, n * sizeof(float), v.data());
    return v;
  }
};

// Whether be runs this convolution natively (cuDNN), forward and backward.
bool native_conv(const Backend& be, const backend::Window2d& g) {
  return be.supports({backend::Op::conv2d_forward, g}) && be.supports({backend::Op::conv2d_backward, g});
}

// max |a - b| / max(|b|, floor) over the elements: floor keeps near-zero entries from dominating.
double rel_error(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-3) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(std::abs(double(b[i])), floor));
  return worst;
}

// The largest relative error (against rel_error's floor of 0.1 sqrt(K)) that a K-term sum of products
// of uniform [-1, 1] values may show between two summation orders. TF32 rounds each operand to 11
// significant bits (u = 2^-11): for these inputs a product's error has a standard deviation near
// 0.27 u, the sum's near 1.3e-3 of the floor, and the largest of some 10^5 entries reaches 4-5 of
// those; 1e-2 is about 7.5 (the first H200 run saw up to 4.5e-3). Float32 sums differ by the rounding
// of their partial sums, which grows with sqrt(K) (a 43264-term sum saw 1.3e-5).
double sum_tolerance(int64_t K, bool tf32) {
  if (tf32) return 1e-2;
  return std::max(1e-5, 8.0 * std::ldexp(1.0, -24) * std::sqrt(double(K)));
}

TEST(CudaModule, LoadsWhereverItWasBuiltAndSaysWhyThereIsNoDevice) {
  const backend::CudaModule m = backend::CudaModule::load();
  std::printf("%s\n", m.status().c_str());
#ifdef KX_TEST_HAVE_CUDA_MODULE
  EXPECT_EQ(m.status().find("no CUDA backend module"), std::string::npos) << m.status();
#endif
  if (m.device_count() == 0) {
    EXPECT_NE(m.status().find("no CUDA"), std::string::npos) << m.status();
    EXPECT_EQ(device_count(DeviceKind::Cuda), 0);
    EXPECT_EQ(Strategy::default_strategy().replicas().front().kind, DeviceKind::Cpu);
    EXPECT_EQ(test::status_of([] { Strategy::mirrored({"cuda:0"}); }), Status::Device);
  } else {
    EXPECT_EQ(Strategy::default_strategy().replicas().front().kind, DeviceKind::Cuda);
  }
}

TEST(CudaModule, AMissingModuleMeansNoCudaDeviceAndTrainingOnTheCpu) {
  const char* old = std::getenv("KX_CUDA_MODULE");
  const std::string saved = old ? old : "";
  setenv("KX_CUDA_MODULE", "/nonexistent/libkx_cuda.so", 1);
  const backend::CudaModule m = backend::CudaModule::load();
  const Strategy s = Strategy::default_strategy();
  if (old) setenv("KX_CUDA_MODULE", saved.c_str(), 1); else unsetenv("KX_CUDA_MODULE");
  EXPECT_EQ(m.device_count(), 0);
  EXPECT_NE(m.status().find("/nonexistent/libkx_cuda.so"), std::string::npos) << m.status();
  EXPECT_EQ(s.replicas().front().kind, DeviceKind::Cpu);
  Model model = Model::sequential(s, {4});
  model.add_dense(3, Activation::Softmax);
  model.compile(CompileOptions{});
  const std::vector<float> x = test::random_floats(32 * 4, 1);
  std::vector<float> y(32);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {32, 4}, y.data(), DType::F32, {32, 1});
  FitOptions fo;
  fo.epochs = 2;
  EXPECT_EQ(model.fit(d, fo, nullptr, nullptr), Status::Ok);
}

struct GemmCase {
  Trans ta, tb;
  int64_t M, N, K;
  bool bias, relu;
  float beta;
};

TEST(CudaKernels, GemmMatchesTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  const std::vector<GemmCase> cases = {
      {Trans::No, Trans::No, 32, 128, 784, true, true, 0},     {Trans::No, Trans::No, 33, 10, 128, true, false, 0},
      {Trans::Yes, Trans::No, 784, 128, 32, false, false, 0},  {Trans::No, Trans::Yes, 32, 784, 128, false, false, 0},
      {Trans::Yes, Trans::Yes, 17, 29, 31, false, false, 1},   {Trans::No, Trans::No, 7, 5, 3, true, true, 1},
      {Trans::No, Trans::No, 257, 300, 129, true, false, 0.5f}};
  for (bool tf32 : {false, true}) {
    Pair p;
    p.gpu->set_tf32(tf32);
    uint32_t s = seed;
    for (const GemmCase& c : cases) {
      const int64_t lda = c.ta == Trans::No ? c.K : c.M, ldb = c.tb == Trans::No ? c.N : c.K;
      const std::vector<float> A = test::random_floats(static_cast<size_t>(c.M * c.K), ++s), B = test::random_floats(static_cast<size_t>(c.K * c.N), ++s),
                               bias = test::random_floats(static_cast<size_t>(c.N), ++s);
      std::vector<float> C = test::random_floats(static_cast<size_t>(c.M * c.N), ++s);
      float* dC = p.up(C);
      const backend::Epilogue cpu_ep{c.bias ? bias.data() : nullptr, c.relu ? Activation::Relu : Activation::None};
      const backend::Epilogue gpu_ep{c.bias ? p.up(bias) : nullptr, cpu_ep.activation};
      p.gpu->gemm(c.ta, c.tb, c.M, c.N, c.K, p.up(A), lda, p.up(B), ldb, c.beta, dC, c.N, gpu_ep);
      p.cpu->gemm(c.ta, c.tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, c.beta, C.data(), c.N, cpu_ep);
      // Entries of a K-term sum are compared relative to the sum's scale (sqrt(K) for these inputs).
      EXPECT_LE(rel_error(p.down(dC, C.size()), C, std::sqrt(double(c.K)) * 0.1), sum_tolerance(c.K, tf32))
          << c.M << "x" << c.N << "x" << c.K << (tf32 ? " tf32" : " fp32");
    }
  }
}

// dW = X^T dY with the bias gradient (the column sums of dY) fused: cuBLASLt's BGRADA epilogue where
// it takes the shape and the output is 16-byte aligned, the separate kernel otherwise.
TEST(CudaKernels, GemmWithTheBiasGradientMatchesTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  struct Shape3 { int64_t M, N, K; };
  for (bool tf32 : {false, true})
    for (const Shape3 c : {Shape3{784, 128, 32}, Shape3{128, 10, 2048}, Shape3{9, 32, 43264}, Shape3{33, 7, 5}})
      for (int64_t offset : {0, 1}) {  // offset 1: a bias gradient that is not 16-byte aligned
        Pair p;
        p.gpu->set_tf32(tf32);
        uint32_t s = seed + static_cast<uint32_t>(c.K + offset);
        const std::vector<float> X = test::random_floats(static_cast<size_t>(c.K * c.M), ++s),
                                 dY = test::random_floats(static_cast<size_t>(c.K * c.N), ++s);
        std::vector<float> dW(static_cast<size_t>(c.M * c.N)), db(static_cast<size_t>(c.N + offset));
        float* dev_dW = p.up(dW);
        float* dev_db = p.up(db);
        backend::Epilogue gpu_ep, cpu_ep;
        gpu_ep.bias_grad = dev_db + offset;
        cpu_ep.bias_grad = db.data() + offset;
        p.gpu->gemm(Trans::Yes, Trans::No, c.M, c.N, c.K, p.up(X), c.M, p.up(dY), c.N, 0.0f, dev_dW, c.N, gpu_ep);
        p.cpu->gemm(Trans::Yes, Trans::No, c.M, c.N, c.K, X.data(), c.M, dY.data(), c.N, 0.0f, dW.data(), c.N, cpu_ep);
        const std::string what = std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
                                 (tf32 ? " tf32" : " fp32") + " offset " + std::to_string(offset);
        EXPECT_LE(rel_error(p.down(dev_dW, dW.size()), dW, std::sqrt(double(c.K)) * 0.1), sum_tolerance(c.K, tf32))
            << what;
        // The bias gradient is a plain sum in float32 either way (no TF32 rounding of its inputs).
        EXPECT_LE(rel_error(p.down(dev_db, db.size()), db, std::sqrt(double(c.K)) * 0.1), sum_tolerance(c.K, false))
            << what;
      }
}

// Mixed precision: rounding (bitwise: one shared formula), 16-bit GEMMs (TF32 over 16-bit values is
// exact in its products), the loss scale's kernels and the gated updates.
TEST(CudaKernels, MixedPrecisionMatchesTheCpu) {
  REQUIRE_GPU();
  Pair p;
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  std::vector<float> x = test::random_floats(10000, seed, -70000.0f, 70000.0f);
  x[3] = std::numeric_limits<float>::infinity();
  for (backend::Rounding r : {backend::Rounding::BFloat16, backend::Rounding::Float16}) {
    std::vector<float> want(x.size());
    p.cpu->round_to(r, static_cast<int64_t>(x.size()), x.data(), want.data());
    float* dev = p.up(x);
    p.gpu->round_to(r, static_cast<int64_t>(x.size()), dev, dev);
    EXPECT_TRUE(p.down(dev, x.size()) == want) << "rounding " << static_cast<int>(r);

    const int64_t M = 37, N = 45, K = 300;
    std::vector<float> A = test::random_floats(M * K, seed + 1), B = test::random_floats(K * N, seed + 2);
    for (float& v : A) v = backend::round_value(v, r);
    for (float& v : B) v = backend::round_value(v, r);
    std::vector<float> C(M * N);
    backend::Epilogue ep;
    ep.rounding = r;
    p.cpu->gemm(Trans::No, Trans::Yes, M, N, K, A.data(), K, B.data(), K, 0.0f, C.data(), N, ep);
    float* dC = p.up(C);
    p.gpu->gemm(Trans::No, Trans::Yes, M, N, K, p.up(A), K, p.up(B), K, 0.0f, dC, N, ep);
    // Both round float32 sums of exact products: at most an ulp of the 16-bit type apart.
    EXPECT_LE(rel_error(p.down(dC, C.size()), C, 0.1), r == backend::Rounding::BFloat16 ? 0x1p-7 : 0x1p-10);
  }
  // The loss scale: a non-finite gradient halves the scale and gates the update off.
  std::vector<float> g = test::random_floats(5000, seed + 3), w = test::random_floats(5000, seed + 4);
  const std::vector<float> rate = {0.1f};
  for (const bool overflow : {false, true}) {
    if (overflow) g[4321] = std::numeric_limits<float>::quiet_NaN();
    backend::LossScaleState cpu_state;
    std::vector<float> cpu_w = w;
    p.cpu->loss_scale_check(static_cast<int64_t>(g.size()), g.data(), &cpu_state);
    p.cpu->loss_scale_update(&cpu_state);
    p.cpu->sgd_update(static_cast<int64_t>(w.size()), cpu_w.data(), g.data(), nullptr, rate.data(), 0.0f,
                      &cpu_state.grad_factor);
    DeviceBuffer state = p.gpu->allocate(sizeof(backend::LossScaleState));
    const backend::LossScaleState fresh;
    p.gpu->to_device(&fresh, sizeof fresh, state.data());
    auto* dev_state = state.data<backend::LossScaleState>();
    float* dev_w = p.up(w);
    p.gpu->loss_scale_check(static_cast<int64_t>(g.size()), p.up(g), dev_state);
    p.gpu->loss_scale_update(dev_state);
    p.gpu->sgd_update(static_cast<int64_t>(w.size()), dev_w, p.up(g), nullptr, p.up(rate), 0.0f, &dev_state->grad_factor);
    backend::LossScaleState gpu_state;
    p.gpu->to_host(dev_state, sizeof gpu_state, &gpu_state);
    EXPECT_EQ(gpu_state.scale, cpu_state.scale);
    EXPECT_EQ(gpu_state.applied, cpu_state.applied);
    EXPECT_EQ(gpu_state.good_steps, cpu_state.good_steps);
    EXPECT_TRUE(p.down(dev_w, w.size()) == cpu_w) << (overflow ? "skipped update" : "update");
  }
}

TEST(CudaKernels, ActivationsMatchTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  const int64_t rows = 37, cols = 45;
  for (Activation a : {Activation::Relu, Activation::Sigmoid, Activation::Tanh, Activation::Softmax}) {
    std::vector<float> y = test::random_floats(static_cast<size_t>(rows * cols), seed, -4, 4);
    const std::vector<float> dy = test::random_floats(y.size(), seed + 1);
    float* dev_y = p.up(y);
    p.gpu->activation_forward(a, rows, cols, dev_y);
    p.cpu->activation_forward(a, rows, cols, y.data());
    // CUDA's tanhf and expf and glibc's may differ by an ulp or two: the forward pass within a bound.
    EXPECT_LE(rel_error(p.down(dev_y, y.size()), y), 1e-5) << activation_name(a);
    // Both backward passes from the CPU's y, so an ulp of the forward pass cannot show up as a
    // difference of the backward one (near |y| = 1, 1 - y*y magnifies it).
    std::vector<float> dz(y.size());
    float* dev_dz = p.up(dz);
    p.gpu->activation_backward(a, rows, cols, p.up(y), p.up(dy), dev_dz);
    p.cpu->activation_backward(a, rows, cols, y.data(), dy.data(), dz.data());
    if (a == Activation::Softmax)  // a warp's sum of dy * y, in another order than the CPU's
      EXPECT_LE(rel_error(p.down(dev_dz, dz.size()), dz), 1e-5) << activation_name(a);
    else  // activation_math.hpp: the same rounded operations on both
      EXPECT_EQ(p.down(dev_dz, dz.size()), dz) << activation_name(a);
  }
}

TEST(CudaKernels, BiasGradientMatchesTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  // Few columns and many rows are summed in chunks of rows (column_sums.cuh), the last one shorter.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {33, 70}, {2048, 10}, {5, 4097}, {70001, 33}}) {
    const std::vector<float> dz = test::random_floats(static_cast<size_t>(rows * cols), seed + uint32_t(cols));
    std::vector<float> db(static_cast<size_t>(cols));
    float* dev_db = p.up(db);
    p.gpu->bias_grad(rows, cols, p.up(dz), dev_db);
    p.cpu->bias_grad(rows, cols, dz.data(), db.data());
    EXPECT_LE(rel_error(p.down(dev_db, db.size()), db, std::sqrt(double(rows)) * 0.1), 1e-5) << rows << "x" << cols;
  }
}

TEST(CudaKernels, LossesMatchTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  std::mt19937 gen(seed);
  const int64_t rows = 300;
  for (LossKind kind : {LossKind::SparseCategoricalCrossentropy, LossKind::CategoricalCrossentropy,
                        LossKind::BinaryCrossentropy, LossKind::MeanSquaredError})
    for (bool logits : {true, false}) {
      if (kind == LossKind::MeanSquaredError && logits) continue;
      const int64_t cols = kind == LossKind::BinaryCrossentropy ? 3 : 10;
      const bool sparse = kind == LossKind::SparseCategoricalCrossentropy;
      const int64_t y_cols = sparse ? 1 : cols;
      std::vector<float> out = logits || kind == LossKind::MeanSquaredError
                                   ? test::random_floats(static_cast<size_t>(rows * cols), gen(), -3, 3)
                                   : test::random_floats(static_cast<size_t>(rows * cols), gen(), 0.01f, 1.0f);
      std::vector<float> y(static_cast<size_t>(rows * y_cols));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < y_cols; ++j)
          y[static_cast<size_t>(r * y_cols + j)] = sparse ? float(gen() % cols)
                                             : kind == LossKind::MeanSquaredError ? float(gen() % 100) / 50 - 1
                                             : kind == LossKind::BinaryCrossentropy ? float(gen() % 2)
                                                                                   : (j == int64_t(gen() % cols) ? 1.0f : 0.0f);
      backend::LossSpec spec{kind, logits, sparse ? AccuracyKind::SparseCategorical
                                           : kind == LossKind::BinaryCrossentropy ? AccuracyKind::Binary
                                                                                   : AccuracyKind::Categorical};
      // Probabilities: 3 positions (rows) per sample, each weighed by its sample's weight.
      spec.positions = logits ? 1 : 3;
      std::vector<float> d(out.size());
      float* dev_d = p.up(d);
      // Keras's sample weights, some of them zero.
      std::vector<float> w = test::random_floats(static_cast<size_t>(rows / spec.positions), gen(), 0.0f, 2.0f);
      for (size_t r = 0; r < w.size(); r += 7) w[r] = 0.0f;
      p.gpu->loss(spec, rows, cols, p.up(out), p.up(y), y_cols, p.up(w), 1.0f / rows, dev_d);
      p.cpu->loss(spec, rows, cols, out.data(), y.data(), y_cols, w.data(), 1.0f / rows, d.data());
      const backend::LossSums g = p.gpu->take_loss_sums(), c = p.cpu->take_loss_sums();
      const std::string what = std::string(loss_name(kind)) + (logits ? " logits" : " probabilities");
      EXPECT_NEAR(g.loss, c.loss, 1e-9 * std::abs(c.loss)) << what;
      EXPECT_NEAR(g.correct, c.correct, 1e-9 * std::abs(c.correct)) << what;
      EXPECT_NEAR(g.weight, c.weight, 1e-9 * c.weight) << what;
      EXPECT_LE(rel_error(p.down(dev_d, d.size()), d, 1e-6), 1e-5) << what;
      EXPECT_EQ(p.gpu->take_loss_sums().loss, 0.0) << "taking the sums zeroes them";
    }
}

// cuDNN's convolution (where the module found it) against the CPU's im2col and GEMMs: the output
// with bias and ReLU, and the gradients of the input, the kernel (Keras's layout) and the bias.
TEST(CudaKernels, CudnnConvolutionMatchesTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  const int64_t rows = 5, F = 8;
  backend::Window2d probe;
  probe.in_h = probe.in_w = 8, probe.channels = 3, probe.k_h = probe.k_w = 3, probe.out_h = probe.out_w = 6;
  if (!native_conv(*p.gpu, probe)) GTEST_SKIP() << "no cuDNN for the CUDA module (KX_CUDNN=0 or libcudnn.so.9 missing)";
  for (bool tf32 : {false, true})
    for (auto [k, stride, pad] : {std::tuple<int64_t, int64_t, int64_t>{3, 1, 0}, {3, 1, 1}, {1, 2, 0}, {7, 2, 3}}) {
      p.gpu->set_tf32(tf32);
      backend::Window2d g;
      g.in_h = 13, g.in_w = 11, g.channels = 6, g.k_h = k, g.k_w = k, g.stride_h = stride, g.stride_w = stride;
      g.pad_top = pad, g.pad_left = pad;
      g.out_h = (g.in_h + 2 * pad - k) / stride + 1, g.out_w = (g.in_w + 2 * pad - k) / stride + 1;
      ASSERT_TRUE(native_conv(*p.gpu, g));
      const int64_t positions = rows * g.out_h * g.out_w, patch = g.patch();
      uint32_t s = seed + static_cast<uint32_t>(k * 10 + stride);
      const std::vector<float> x = test::random_floats(static_cast<size_t>(rows * g.in_h * g.in_w * g.channels), ++s),
                               w = test::random_floats(static_cast<size_t>(patch * F), ++s),
                               bias = test::random_floats(static_cast<size_t>(F), ++s),
                               dz = test::random_floats(static_cast<size_t>(positions * F), ++s);
      // The CPU: columns, then GEMMs.
      std::vector<float> col(static_cast<size_t>(positions * patch)), y(static_cast<size_t>(positions * F)),
          dw(w.size()), db(bias.size()), dcol(col.size()), dx(x.size());
      p.cpu->im2col(g, rows, x.data(), col.data());
      p.cpu->gemm(Trans::No, Trans::No, positions, F, patch, col.data(), patch, w.data(), F, 0.0f, y.data(), F,
                  backend::Epilogue{bias.data(), Activation::Relu});
      p.cpu->gemm(Trans::Yes, Trans::No, patch, F, positions, col.data(), patch, dz.data(), F, 0.0f, dw.data(), F, {});
      p.cpu->bias_grad(positions, F, dz.data(), db.data());
      p.cpu->gemm(Trans::No, Trans::Yes, positions, patch, F, dz.data(), F, w.data(), F, 0.0f, dcol.data(), patch, {});
      p.cpu->col2im(g, rows, dcol.data(), dx.data());
      // The GPU: cuDNN.
      std::vector<float> zeros_y(y.size()), zeros_w(w.size()), zeros_b(bias.size()), zeros_x(x.size());
      float* gy = p.up(zeros_y);
      float* gdw = p.up(zeros_w);
      float* gdb = p.up(zeros_b);
      float* gdx = p.up(zeros_x);
      const float* gx = p.up(x);
      const float* gw = p.up(w);
      p.gpu->conv2d_forward(g, F, rows, gx, gw, p.up(bias), Activation::Relu, gy);
      p.gpu->conv2d_backward(g, F, rows, gx, gw, p.up(dz), gdx, gdw, gdb);
      char what[64];
      std::snprintf(what, sizeof what, "k%lld s%lld p%lld %s", static_cast<long long>(k), static_cast<long long>(stride),
                    static_cast<long long>(pad), tf32 ? "tf32" : "fp32");
      EXPECT_LE(rel_error(p.down(gy, y.size()), y, std::sqrt(double(patch)) * 0.1), sum_tolerance(patch, tf32))
          << "output " << what;
      EXPECT_LE(rel_error(p.down(gdw, dw.size()), dw, std::sqrt(double(positions)) * 0.1),
                sum_tolerance(positions, tf32))
          << "kernel gradient " << what;
      EXPECT_LE(rel_error(p.down(gdb, db.size()), db, std::sqrt(double(positions)) * 0.1),
                sum_tolerance(positions, false))
          << "bias gradient " << what;
      EXPECT_LE(rel_error(p.down(gdx, dx.size()), dx, std::sqrt(double(F * k * k)) * 0.1),
                sum_tolerance(F * k * k, tf32))
          << "input gradient " << what;
    }
}

TEST(CudaKernels, WindowKernelsMatchTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  const int64_t rows = 3;
  for (auto [k, stride, pad] : {std::tuple<int64_t, int64_t, int64_t>{3, 1, 0}, {3, 1, 1}, {5, 2, 2}, {2, 2, 0}}) {
    backend::Window2d g;
    g.in_h = 11, g.in_w = 9, g.channels = 4, g.k_h = k, g.k_w = k, g.stride_h = stride, g.stride_w = stride;
    g.pad_top = pad, g.pad_left = pad;
    g.out_h = (g.in_h + 2 * pad - k) / stride + 1, g.out_w = (g.in_w + 2 * pad - k) / stride + 1;
    const std::vector<float> x = test::random_floats(static_cast<size_t>(rows * g.in_h * g.in_w * g.channels), seed + uint32_t(k));
    std::vector<float> col(static_cast<size_t>(rows * g.out_h * g.out_w * g.patch()));
    float* dev_x = p.up(x);
    float* dev_col = p.up(col);
    p.gpu->im2col(g, rows, dev_x, dev_col);
    p.cpu->im2col(g, rows, x.data(), col.data());
    EXPECT_EQ(p.down(dev_col, col.size()), col) << "im2col k" << k;
    const std::vector<float> dcol = test::random_floats(col.size(), seed + 7);
    std::vector<float> dx(x.size());
    float* dev_dx = p.up(dx);
    p.gpu->col2im(g, rows, p.up(dcol), dev_dx);
    p.cpu->col2im(g, rows, dcol.data(), dx.data());
    EXPECT_EQ(p.down(dev_dx, dx.size()), dx) << "col2im k" << k;  // window_math.hpp: the CPU's order
    if (pad == 0) {
      std::vector<float> y(static_cast<size_t>(rows * g.out_h * g.out_w * g.channels));
      float* dev_y = p.up(y);
      p.gpu->max_pool_forward(g, rows, dev_x, dev_y);
      p.cpu->max_pool_forward(g, rows, x.data(), y.data());
      EXPECT_EQ(p.down(dev_y, y.size()), y) << "max pool k" << k;
      const std::vector<float> dy = test::random_floats(y.size(), seed + 9);
      p.gpu->max_pool_backward(g, rows, dev_x, dev_y, p.up(dy), dev_dx);
      p.cpu->max_pool_backward(g, rows, x.data(), y.data(), dy.data(), dx.data());
      EXPECT_EQ(p.down(dev_dx, dx.size()), dx) << "max pool backward k" << k;
      p.gpu->avg_pool_forward(g, rows, dev_x, dev_y);
      p.cpu->avg_pool_forward(g, rows, x.data(), y.data());
      EXPECT_EQ(p.down(dev_y, y.size()), y) << "average pool k" << k;
      p.gpu->avg_pool_backward(g, rows, p.up(dy), dev_dx);
      p.cpu->avg_pool_backward(g, rows, dy.data(), dx.data());
      EXPECT_EQ(p.down(dev_dx, dx.size()), dx) << "average pool backward k" << k;
    }
  }
}

TEST(CudaKernels, BatchNormalizationMatchesTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  // {4096, 64} and {100003, 3} go through chunks of rows (column_sums.cuh), the last one shorter.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 3}, {4096, 64}, {50, 40}, {100003, 3}}) {
    const std::vector<float> x = test::random_floats(static_cast<size_t>(rows * cols), seed, -2.0f, 3.0f);
    const std::vector<float> dy = test::random_floats(x.size(), seed + 1);
    const std::vector<float> gamma = test::random_floats(static_cast<size_t>(cols), seed + 2, 0.5f, 1.5f);
    const std::vector<float> beta = test::random_floats(static_cast<size_t>(cols), seed + 3);
    std::vector<float> mean(static_cast<size_t>(cols)), var(mean.size()), y(x.size()), dx(x.size()), dg(mean.size()),
        db(mean.size());
    float *dev_mean = p.up(mean), *dev_var = p.up(var), *dev_x = p.up(x), *dev_y = p.up(y);
    p.gpu->column_moments(rows, cols, dev_x, dev_mean, dev_var);
    p.cpu->column_moments(rows, cols, x.data(), mean.data(), var.data());
    EXPECT_LE(rel_error(p.down(dev_mean, mean.size()), mean), 1e-6) << "mean " << rows;
    EXPECT_LE(rel_error(p.down(dev_var, var.size()), var), 1e-6) << "variance " << rows;
    p.gpu->batch_norm_apply(rows, cols, dev_x, dev_mean, dev_var, 1e-3f, p.up(gamma), p.up(beta), Activation::None,
                            dev_y);
    p.cpu->batch_norm_apply(rows, cols, x.data(), mean.data(), var.data(), 1e-3f, gamma.data(), beta.data(),
                            Activation::None, y.data());
    EXPECT_LE(rel_error(p.down(dev_y, y.size()), y), 1e-5) << "normalised " << rows;
    float *dev_dx = p.up(dx), *dev_dg = p.up(dg), *dev_db = p.up(db);
    std::vector<float> dy_cpu = dy;
    p.gpu->batch_norm_backward(rows, cols, dev_x, p.up(dy), dev_mean, dev_var, 1e-3f, p.up(gamma), p.up(beta),
                               Activation::None, dev_dx, dev_dg, dev_db);
    p.cpu->batch_norm_backward(rows, cols, x.data(), dy_cpu.data(), mean.data(), var.data(), 1e-3f, gamma.data(),
                               beta.data(), Activation::None, dx.data(), dg.data(), db.data());
    EXPECT_LE(rel_error(p.down(dev_dg, dg.size()), dg), 1e-5) << "dgamma " << rows;
    EXPECT_LE(rel_error(p.down(dev_db, db.size()), db), 1e-5) << "dbeta " << rows;
    EXPECT_LE(rel_error(p.down(dev_dx, dx.size()), dx), 1e-4) << "dx " << rows;
  }
}

TEST(CudaKernels, MergeKernelsMatchTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  const int64_t rows = 37, a_cols = 5, b_cols = 11;
  const std::vector<float> a = test::random_floats(static_cast<size_t>(rows * a_cols), seed);
  const std::vector<float> b = test::random_floats(a.size(), seed + 1);
  std::vector<float> out(a.size());
  float* dev_out = p.up(out);
  p.gpu->add(rows * a_cols, p.up(a), p.up(b), dev_out);
  p.cpu->add(rows * a_cols, a.data(), b.data(), out.data());
  EXPECT_EQ(p.down(dev_out, out.size()), out) << "add";
  p.gpu->scaled_difference(rows * a_cols, 0.01f, p.up(a), p.up(b), dev_out);
  p.cpu->scaled_difference(rows * a_cols, 0.01f, a.data(), b.data(), out.data());
  EXPECT_EQ(p.down(dev_out, out.size()), out) << "scaled difference";
  const std::vector<float> wide = test::random_floats(static_cast<size_t>(rows * b_cols), seed + 2);
  std::vector<float> cat(static_cast<size_t>(rows * (a_cols + b_cols)));
  float* dev_cat = p.up(cat);
  p.gpu->copy_columns(rows, a_cols, p.up(a), a_cols, dev_cat, a_cols + b_cols);
  p.gpu->copy_columns(rows, b_cols, p.up(wide), b_cols, dev_cat + a_cols, a_cols + b_cols);
  p.cpu->copy_columns(rows, a_cols, a.data(), a_cols, cat.data(), a_cols + b_cols);
  p.cpu->copy_columns(rows, b_cols, wide.data(), b_cols, cat.data() + a_cols, a_cols + b_cols);
  EXPECT_EQ(p.down(dev_cat, cat.size()), cat) << "copy columns";
}

TEST(CudaTraining, ResNet50StepsLowerTheLossAndMatchTheCpu) {
  REQUIRE_GPU();
  auto run = [](const std::string& device, std::vector<double>* losses) {
    Strategy s = Strategy::mirrored({device});
    s.set_tf32(false);
    Model m = applications::resnet50(s, {32, 32, 3}, true, 4);
    CompileOptions co;
    m.compile(co);
    const int64_t n = 8;
    std::vector<float> x = test::random_floats(static_cast<size_t>(n * 32 * 32 * 3), 12), y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % 4);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 32, 32, 3}, y.data(), DType::F32, {n});
    d.batch(n, false);
    FitOptions fo;
    fo.epochs = 5;
    History h;
    ASSERT_EQ(m.fit(d, fo, nullptr, &h), Status::Ok);
    for (int e = 0; e < 5; ++e) losses->push_back(h.get("loss", e));
  };
  std::vector<double> gpu, cpu;
  run("cuda:0", &gpu);
  run("cpu", &cpu);
  EXPECT_LT(gpu.back(), gpu.front());
  EXPECT_NEAR(gpu.front(), cpu.front(), 1e-3 * std::max(1.0, std::fabs(cpu.front())));
}

TEST(CudaKernels, ElementwiseKernelsMatchTheCpu) {
  REQUIRE_GPU();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("KX_TEST_SEED=" + std::to_string(seed));
  Pair p;
  const int64_t n = 100003;
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n), seed), g = test::random_floats(static_cast<size_t>(n), seed + 1);
  // Dropout: the same counter-based mask, bit for bit.
  std::vector<float> mask(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  float* dev_mask = p.up(mask);
  float* dev_y = p.up(y);
  // The step seed is read from device memory, as a replayed step does.
  const std::vector<uint64_t> step_seed{seed};
  p.gpu->dropout_forward(0.3f, p.up(step_seed), 4, 12345, n, p.up(x), dev_mask, dev_y);
  p.cpu->dropout_forward(0.3f, step_seed.data(), 4, 12345, n, x.data(), mask.data(), y.data());
  EXPECT_EQ(p.down(dev_mask, mask.size()), mask);
  EXPECT_EQ(p.down(dev_y, y.size()), y);
  // multiply and copy
  p.gpu->multiply(n, p.up(x), p.up(g), dev_y);
  p.cpu->multiply(n, x.data(), g.data(), y.data());
  EXPECT_EQ(p.down(dev_y, y.size()), y);
  p.gpu->copy(n, p.up(g), dev_y);
  EXPECT_EQ(p.down(dev_y, y.size()), g);
  // Optimizers, several steps.
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<float> w = x, m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    float* dev_w = p.up(w);
    float* dev_m = p.up(m);
    float* dev_v = p.up(v);
    const float* dev_g = p.up(g);
    const std::vector<float> sgd_rate{0.01f};
    const float* dev_sgd_rate = p.up(sgd_rate);
    for (int step = 1; step <= 5; ++step) {
      if (variant == 0) {
        p.gpu->sgd_update(n, dev_w, dev_g, nullptr, dev_sgd_rate, 0.0f, nullptr);
        p.cpu->sgd_update(n, w.data(), g.data(), nullptr, sgd_rate.data(), 0.0f, nullptr);
      } else if (variant == 1) {
        p.gpu->sgd_update(n, dev_w, dev_g, dev_m, dev_sgd_rate, 0.9f, nullptr);
        p.cpu->sgd_update(n, w.data(), g.data(), m.data(), sgd_rate.data(), 0.9f, nullptr);
      } else {
        const std::vector<float> lr_t{static_cast<float>(1e-3 * std::sqrt(1 - std::pow(0.999, step)) / (1 - std::pow(0.9, step)))};
        p.gpu->adam_update(n, dev_w, dev_g, dev_m, dev_v, p.up(lr_t), 0.1f, 0.001f, 1e-7f, nullptr);
        p.cpu->adam_update(n, w.data(), g.data(), m.data(), v.data(), lr_t.data(), 0.1f, 0.001f, 1e-7f, nullptr);
      }
    }
    EXPECT_LE(rel_error(p.down(dev_w, w.size()), w), 1e-5) << "optimizer " << variant;
  }
  // gather_rows with a device index.
  std::vector<int64_t> idx(500);
  std::mt19937 gen(seed);
  for (auto& i : idx) i = int64_t(gen() % 1000);
  std::vector<float> rows_out(500 * 100);
  float* dev_rows = p.up(rows_out);
  p.gpu->gather_rows(p.up(x), 100, p.up(idx), 500, dev_rows);
  p.cpu->gather_rows(x.data(), 100, idx.data(), 500, rows_out.data());
  EXPECT_EQ(p.down(dev_rows, rows_out.size()), rows_out);
}

// ---- whole models on cuda:0 ----

std::string fashion_dir() {
  const char* env = std::getenv("KX_FASHION_MNIST_DIR");
  return env ? env : "/usr/share/datasets/fashion-mnist";
}
bool have_fashion_mnist() { return std::filesystem::exists(fashion_dir() + "/train-images-idx3-ubyte.gz"); }

struct FitResult {
  std::vector<float> weights;
  double test_accuracy = 0;
};

FitResult fashion_mlp(const std::string& device, int epochs, bool tf32) {
  const std::string dir = fashion_dir();
  Dataset train = Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  Dataset test = Dataset::from_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  Strategy s = Strategy::mirrored({device});
  s.set_tf32(tf32);
  Model m = Model::sequential(s, {28, 28});
  m.add_flatten();
  m.add_dense(128, Activation::Relu);
  m.add_dropout(0.2f);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.seed = 11;
  m.compile(co);
  train.shuffle(train.num_samples(), 5);
  train.batch(32, false);
  FitOptions fo;
  fo.epochs = epochs;
  EXPECT_EQ(m.fit(train, fo, nullptr, nullptr), Status::Ok);
  return {m.get_weights(), m.evaluate(test).accuracy};
}

TEST(CudaTraining, FashionMnistMlpReachesTheCpuAccuracy) {
  REQUIRE_GPU();
  if (!have_fashion_mnist()) GTEST_SKIP() << "no Fashion-MNIST in " << fashion_dir();
  const FitResult cpu = fashion_mlp("cpu", 3, false);
  const FitResult gpu = fashion_mlp("cuda:0", 3, true);
  std::printf("test accuracy: cpu %.4f, cuda:0 (tf32) %.4f\n", cpu.test_accuracy, gpu.test_accuracy);
  EXPECT_NEAR(gpu.test_accuracy, cpu.test_accuracy, 0.01);
}

TEST(CudaTraining, StepsMatchTheCpuAndRepeatBitwise) {
  REQUIRE_GPU();
  const std::vector<float> x = test::random_floats(512 * 20, 3);
  std::vector<float> y(512);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 7) % 5);
  auto run = [&](const std::string& device) {
    Strategy s = Strategy::mirrored({device});
    s.set_tf32(false);
    Model m = Model::sequential(s, {20});
    m.add_dense(64, Activation::Relu);
    m.add_dropout(0.1f);
    m.add_dense(32, Activation::Tanh);
    m.add_dense(5, Activation::Softmax);
    CompileOptions co;
    co.seed = 4;
    m.compile(co);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {512, 20}, y.data(), DType::F32, {512, 1});
    d.batch(64, false);
    FitOptions fo;
    fo.epochs = 2;  // 16 Adam steps: before rounding differences can grow
    EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
    return m.get_weights();
  };
  const std::vector<float> cpu = run("cpu"), gpu = run("cuda:0"), again = run("cuda:0");
  EXPECT_LE(test::relative_difference(gpu, cpu), 1e-4);
  EXPECT_EQ(gpu, again) << "two runs on cuda:0 differ";
}

// Dense and Conv2D without a bias (use_bias false): a null bias through cuBLASLt's epilogue, cuDNN's
// convolution (or im2col and GEMMs without cuDNN) and their backward passes, against the CPU.
TEST(CudaTraining, LayersWithoutBiasMatchTheCpu) {
  REQUIRE_GPU();
  const std::vector<float> x = test::random_floats(256 * 8 * 8 * 3, 5);
  std::vector<float> y(256);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 5) % 3);
  auto run = [&](const std::string& device) {
    Strategy s = Strategy::mirrored({device});
    s.set_tf32(false);
    Model m = Model::sequential(s, {8, 8, 3});
    m.add_conv2d(8, 3, 3, 1, Padding::Same, Activation::Relu, false);
    LayerSpec bn;
    bn.kind = LayerKind::BatchNormalization;
    m.add(bn);
    m.add_conv2d(4, 1, 1, 1, Padding::Valid, Activation::None, false);  // pointwise: no columns
    m.add_flatten();
    m.add_dense(16, Activation::Relu, false);
    m.add_dense(3, Activation::Softmax);
    CompileOptions co;
    co.seed = 7;
    co.optimizer.kind = OptimizerKind::Sgd;  // steps proportional to the gradients: no Adam sign flips
    co.optimizer.learning_rate = 0.05;
    m.compile(co);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {256, 8, 8, 3}, y.data(), DType::F32, {256, 1});
    d.batch(32, false);
    FitOptions fo;
    fo.epochs = 2;
    EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
    return m.get_weights();
  };
  const std::vector<float> cpu = run("cpu"), gpu = run("cuda:0");
  ASSERT_EQ(cpu.size(), static_cast<size_t>(3 * 3 * 3 * 8 + 4 * 8 + 8 * 4 + 8 * 8 * 4 * 16 + 16 * 3 + 3));
  EXPECT_LE(test::relative_difference(gpu, cpu), 1e-4);
}

// A per-position softmax head ([H, W, C] output, Keras's last-axis softmax) with per-position sparse
// labels: its fit, evaluate and predict on cuda:0 against the CPU's.
TEST(CudaTraining, PerPositionSoftmaxHeadMatchesTheCpu) {
  REQUIRE_GPU();
  constexpr int64_t kN = 96, kSide = 6, kClasses = 4;
  const std::vector<float> x = test::random_floats(kN * kSide * kSide * 3, 12);
  std::vector<float> y(kN * kSide * kSide);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>((i * 5 + i / 7) % kClasses);
  struct Run {
    std::vector<float> weights, predicted;
    EvalResult eval;
  };
  auto run = [&](const std::string& device) {
    Strategy s = Strategy::mirrored({device});
    s.set_tf32(false);
    Model m = Model::sequential(s, {kSide, kSide, 3});
    m.add_conv2d(8, 3, 3, 1, Padding::Same, Activation::Relu);
    m.add_conv2d(kClasses, 1, 1, 1, Padding::Valid, Activation::Softmax);
    CompileOptions co;
    co.seed = 9;
    co.accuracy = true;
    co.optimizer.kind = OptimizerKind::Sgd;
    co.optimizer.learning_rate = 0.1;
    m.compile(co);
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {kN, kSide, kSide, 3}, y.data(), DType::F32,
                                     {kN, kSide, kSide});
    d.batch(32, false);
    FitOptions fo;
    fo.epochs = 2;
    EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
    return Run{m.get_weights(), m.predict(x.data(), kN), m.evaluate(d)};
  };
  const Run cpu = run("cpu"), gpu = run("cuda:0");
  EXPECT_LE(test::relative_difference(gpu.weights, cpu.weights), 1e-4);
  EXPECT_LE(rel_error(gpu.predicted, cpu.predicted), 1e-4);
  EXPECT_NEAR(gpu.eval.loss, cpu.eval.loss, 1e-4 * cpu.eval.loss);
  EXPECT_NEAR(gpu.eval.accuracy, cpu.eval.accuracy, 1.0 / (kN * kSide * kSide));
}

}  // namespace
}  // namespace kx
