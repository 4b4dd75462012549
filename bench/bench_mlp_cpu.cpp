// CPU benchmark: the Fashion-MNIST MLP (784-256-256-10, Adam) at batch 32 and 256 with a fixed thread
// count, kx's GEMM kernels side by side, and the same loop in PyTorch when python3 has torch (with
// the environment it is given, and in its best configuration).
//
// With --precision bf16 (or fp16), kx's float32 and the mixed policy are timed in the same run (both
// bfloat16 kernels where the CPU has AVX512_BF16), and PyTorch under torch.autocast("cpu", torch.bfloat16).
//
//   bench_mlp_cpu [--data DIR] [--threads N] [--steps N] [--batch N] [--default-only] [--no-torch]
//                 [--precision bf16|fp16]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kx/kx.hpp"

namespace {

struct Result {
  double ms_per_step = 0;
  double samples_per_s = 0;
  std::string kernel;
};

Result run_kx(const kx::Dataset& data, int64_t batch, int threads, int64_t steps, kx::CpuGemm gemm,
              kx::Precision p = kx::Precision::Float32, kx::CpuBf16Gemm bf16 = kx::CpuBf16Gemm::Auto) {
  kx::Strategy s = kx::Strategy::default_strategy();
  s.set_num_threads(threads);
  s.set_cpu_gemm(gemm);
  s.set_cpu_bf16_gemm(bf16);
  kx::Model model = kx::bench::fashion_mlp(s, p);
  kx::Dataset train = data;
  train.shuffle(train.num_samples(), 1);
  train.batch(batch, true);
  Result r;
  r.ms_per_step = kx::bench::ms_per_step(model, train, steps, 50);
  r.samples_per_s = static_cast<double>(batch) * 1e3 / r.ms_per_step;
  r.kernel = model.gemm_kernel();
  return r;
}

// Runs the PyTorch peer; returns ms/step per batch size, or empty when torch is missing.
std::vector<double> run_torch(const std::string& env, const std::string& data, int threads, int64_t steps,
                              const std::vector<int64_t>& batches, bool autocast = false) {
  std::string args = "--data " + data + (autocast ? " --autocast bf16" : "");
  args.append(" --threads ").append(std::to_string(threads));
  args.append(" --steps ").append(std::to_string(steps));
  args.append(" --batches ");
  for (size_t i = 0; i < batches.size(); ++i) args.append(i ? "," : "").append(std::to_string(batches[i]));
  return kx::bench::run_torch(env, "torch_mlp_cpu.py", args);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int threads = 2;
  int64_t steps = 1000;
  bool torch = true;
  bool alternatives = true;  // also time the GEMM kernels the default did not pick
  std::vector<int64_t> batches = {32, 256};
  kx::Precision mixed = kx::Precision::Float32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--no-torch") torch = false;
    else if (a == "--default-only") alternatives = false;
    else if (a == "--batch" && i + 1 < argc) batches = {std::atoll(argv[++i])};
    else if (a == "--precision" && i + 1 < argc && kx::bench::parse_precision(argv[i + 1], mixed)) ++i;
    else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--threads N] [--steps N] [--batch N] [--default-only] [--no-torch] [--precision bf16|fp16]\n", argv[0]);
      return 2;
    }
  }
  const kx::Dataset data =
      kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("kx CPU MLP benchmark: 784-256-256-10, Adam, %d threads, %lld timed steps (OPENBLAS_CORETYPE=%s)\n",
              threads, static_cast<long long>(steps), coretype ? coretype : "(unset)");
  std::vector<Result> best;
  for (int64_t b : batches) {
    Result a = run_kx(data, b, threads, steps, kx::CpuGemm::Auto);
    std::printf("kx    batch=%-4lld %8.3f ms/step %10.0f samples/s  gemm: %s (default)\n", static_cast<long long>(b),
                a.ms_per_step, a.samples_per_s, a.kernel.c_str());
    best.push_back(a);
    if (mixed != kx::Precision::Float32) {
      const kx::CpuBf16Gemm kernels[] = {kx::CpuBf16Gemm::Fma, kx::CpuBf16Gemm::Dot};
      for (kx::CpuBf16Gemm k : kernels) {
        if (mixed != kx::Precision::MixedBfloat16 && k == kx::CpuBf16Gemm::Dot) break;
        try {
          const Result r = run_kx(data, b, threads, steps, kx::CpuGemm::Auto, mixed, k);
          std::printf("kx    batch=%-4lld %8.3f ms/step %10.0f samples/s  %s, gemm: %s (%.2fx float32's speed)\n",
                      static_cast<long long>(b), r.ms_per_step, r.samples_per_s, kx::precision_name(mixed),
                      r.kernel.c_str(), a.ms_per_step / r.ms_per_step);
        } catch (const kx::Error& e) {
          std::printf("kx    %s: %s\n", kx::precision_name(mixed), e.what());
        }
      }
    }
    for (kx::CpuGemm g : {kx::CpuGemm::Builtin, kx::CpuGemm::Blas}) {
      if (!alternatives) break;
      try {
        Result r = run_kx(data, b, threads, steps, g);
        if (r.kernel == a.kernel) continue;
        std::printf("kx    batch=%-4lld %8.3f ms/step %10.0f samples/s  gemm: %s\n", static_cast<long long>(b),
                    r.ms_per_step, r.samples_per_s, r.kernel.c_str());
      } catch (const kx::Error&) {
        // this build has no such kernel
      }
    }
  }
  if (!torch) return 0;
  const std::string default_env = kx::bench::kTorchDefaultEnv, best_env = kx::bench::kTorchBestEnv;
  const std::vector<double> t_default = run_torch(default_env, dir, threads, steps, batches);
  const std::vector<double> t_best = run_torch(best_env, dir, threads, steps, batches);
  if (t_default.size() != batches.size() || t_best.size() != batches.size()) {
    std::printf("PyTorch: not available (/usr/bin/python3 -c 'import torch' failed); no comparison\n");
    return 0;
  }
  std::printf("\n%-6s %14s %18s %18s %14s\n", "batch", "kx ms/step", "torch default", "torch best", "kx speed-up");
  for (size_t i = 0; i < batches.size(); ++i)
    std::printf("%-6lld %14.3f %18.3f %18.3f %13.2fx\n", static_cast<long long>(batches[i]), best[i].ms_per_step,
                t_default[i], t_best[i], t_best[i] / best[i].ms_per_step);
  if (mixed == kx::Precision::MixedBfloat16) {
    const std::vector<double> t_autocast = run_torch(best_env, dir, threads, steps, batches, true);
    for (size_t i = 0; i < t_autocast.size(); ++i)
      std::printf("torch autocast bf16 batch=%-4lld %8.3f ms/step (best environment)\n",
                  static_cast<long long>(batches[i]), t_autocast[i]);
    if (t_autocast.empty()) std::printf("torch autocast(\"cpu\", torch.bfloat16): not available\n");
  }
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
