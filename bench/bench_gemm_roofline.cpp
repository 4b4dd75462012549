// What this CPU can do at most, and how close kx's and PyTorch's GEMMs come to it at the shapes the
// benchmark workloads run: the float32 fused multiply-add peak of the given threads (independent FMA
// chains, no memory traffic), then kx's CPU GEMM and PyTorch's matmul (with --python, a venv that has
// torch) at each shape, in GFLOP/s and as a share of that peak. A workload's step cannot run faster
// than its GEMM FLOPs at this peak: this is the ceiling any speed-up target is to be held against.
//
//   bench_gemm_roofline [--threads 2] [--python VENV/bin/python]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/target_clones.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kChains = 12;  // independent accumulators: more than the FMA latency times the ports

// `iterations` rounds of kChains FMAs on Lanes lanes; returns a value that depends on them all, so the
// compiler keeps the work. Inlined into a function built for the vector width it is meant for, where
// the chains fit the register file (16 lanes in 8-lane registers would spill).
using Vec16 = float __attribute__((vector_size(64)));
using Vec8 = float __attribute__((vector_size(32)));
using Vec4 = float __attribute__((vector_size(16)));

template <typename Vec, int Lanes = sizeof(Vec) / sizeof(float)>
[[gnu::always_inline]] inline float fma_rounds(int64_t iterations, float seed) {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < Lanes; ++l) acc[c][l] = seed + static_cast<float>(c * Lanes + l) * 1e-3f;
  Vec scale, shift;
  for (int l = 0; l < Lanes; ++l) {
    scale[l] = 0.999999f;
    shift[l] = 1e-7f;
  }
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * scale + shift;
  float sum = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < Lanes; ++l) sum += acc[c][l];
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,fma"))) float fma_rounds_avx512(int64_t n, float seed) { return fma_rounds<Vec16>(n, seed); }
__attribute__((target("avx2,fma"))) float fma_rounds_avx2(int64_t n, float seed) { return fma_rounds<Vec8>(n, seed); }
#endif

// The widest FMAs this CPU has, and the floats each multiplies.
struct FmaRounds {
  float (*run)(int64_t, float);
  int lanes;
};
FmaRounds widest_fma_rounds() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return {&fma_rounds_avx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {&fma_rounds_avx2, 8};
#endif
  return {[](int64_t n, float seed) { return fma_rounds<Vec4>(n, seed); }, 4};
}

// GFLOP/s of `threads` threads each running fma_rounds at once.
double fma_peak_gflops(int threads) {
  const int64_t iterations = 20'000'000;
  const FmaRounds rounds = widest_fma_rounds();
  std::vector<float> sink(static_cast<size_t>(threads));
  rounds.run(iterations / 20, 1.0f);  // wake the core up
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { sink[static_cast<size_t>(t)] = rounds.run(iterations, static_cast<float>(t)); });
  for (std::thread& t : pool) t.join();
  const double s = seconds_since(t0);
  float all = 0;
  for (float v : sink) all += v;
  if (all != all) std::printf("(the FMA chains overflowed)\n");
  return 2.0 * kChains * rounds.lanes * static_cast<double>(iterations) * threads / s / 1e9;
}

struct GemmShape {
  int64_t m, n, k;
  const char* where;
};

// kx's GEMM, C[M,N] = A[M,K] B[K,N], repeated for at least `seconds`.
double kx_gemm_gflops(kx::backend::Backend& be, const GemmShape& g, double seconds) {
  std::vector<float> a(static_cast<size_t>(g.m * g.k)), b(static_cast<size_t>(g.k * g.n)), c(static_cast<size_t>(g.m * g.n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.01f;
  using kx::backend::Trans;
  const auto once = [&] {
    be.gemm(Trans::No, Trans::No, g.m, g.n, g.k, a.data(), g.k, b.data(), g.n, 0.0f, c.data(), g.n, {});
  };
  for (int i = 0; i < 3; ++i) once();
  int64_t reps = 0;
  const auto t0 = Clock::now();
  double s = 0;
  do {
    once();
    ++reps;
  } while ((s = seconds_since(t0)) < seconds);
  return 2.0 * static_cast<double>(g.m * g.n * g.k * reps) / s / 1e9;
}

// PyTorch's figures for the shapes, in order (0 where it gave none).
std::vector<double> torch_gemm_gflops(const std::string& python, const std::vector<GemmShape>& shapes, int threads) {
  std::string cmd = python + " " KX_BENCH_DIR "/peers/torch_gemm.py --threads " + std::to_string(threads);
  for (const GemmShape& g : shapes)
    cmd.append(" ").append(std::to_string(g.m)).append("x").append(std::to_string(g.n)).append("x").append(std::to_string(g.k));
  cmd.append(" 2>&1");
  std::vector<double> out(shapes.size(), 0.0);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    long long m = 0, n = 0, k = 0;
    double gflops = 0;
    if (std::sscanf(line, "torch gemm %lld %lld %lld %lf", &m, &n, &k, &gflops) != 4) {
      std::printf("  %s", line);
      continue;
    }
    for (size_t i = 0; i < shapes.size(); ++i)
      if (shapes[i].m == m && shapes[i].n == n && shapes[i].k == k) out[i] = gflops;
  }
  pclose(p);
  return out;
}

std::string cpu_model() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "unknown CPU";
  char line[512];
  std::string model = "unknown CPU";
  while (std::fgets(line, sizeof line, f)) {
    const std::string s(line);
    if (s.rfind("model name", 0) == 0) {
      model = s.substr(s.find(':') + 2);
      if (!model.empty() && model.back() == '\n') model.pop_back();
      break;
    }
  }
  std::fclose(f);
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  std::string python;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (flag == "--python") {
      python = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--python VENV/bin/python]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  const std::vector<GemmShape> shapes{
      {64, 512, 128, "LSTM(128) batch 64: a time step's recurrent product"},
      {64, 128, 512, "the same backward: dh = dgates R^T"},
      {3200, 512, 40, "the inputs' product over 50 steps"},
      {2048, 128, 128, "transformer batch 32 x 64 steps: a projection"},
      {2048, 256, 128, "its feed-forward, first Dense"},
      {73728, 96, 16, "MobileNetV2 96x96 batch 32: its first 1x1 expansion"},
      {18432, 24, 144, "and a 1x1 projection at 24x24"},
      {1024, 1024, 1024, "square"},
  };
  std::printf("CPU: %s; %d threads\n", cpu_model().c_str(), threads);
  const double peak = fma_peak_gflops(threads);
  std::printf("float32 FMA peak (independent chains, no memory): %.1f GFLOP/s\n\n", peak);
  auto be = kx::backend::make_cpu_backend(threads);
  const std::vector<double> torch = python.empty() ? std::vector<double>(shapes.size(), 0.0)
                                                   : torch_gemm_gflops(python, shapes, threads);
  std::printf("%-18s %14s %8s %14s %8s  %s\n", "M x N x K", "kx GFLOP/s", "of peak", "torch GFLOP/s", "of peak", "where");
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& g = shapes[i];
    const double kx_rate = kx_gemm_gflops(*be, g, 0.3);
    const std::string dims = std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
    if (torch[i] > 0)
      std::printf("%-18s %14.1f %7.0f%% %14.1f %7.0f%%  %s\n", dims.c_str(), kx_rate, 100 * kx_rate / peak, torch[i],
                  100 * torch[i] / peak, g.where);
    else
      std::printf("%-18s %14.1f %7.0f%% %14s %8s  %s\n", dims.c_str(), kx_rate, 100 * kx_rate / peak, "-", "", g.where);
  }
  std::printf("\nkx's GEMM kernel: %s\n", be->gemm_kernel_name().c_str());
  return 0;
}
