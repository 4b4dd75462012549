// CPU benchmark: the Fashion-MNIST MLP (784-256-256-10, Adam) at batch 32 and 256 with a fixed thread
// count, kx's GEMM kernels side by side, and the same loop in PyTorch when python3 has torch (with
// the environment it is given, and in its best configuration).
//
//   bench_mlp_cpu [--data DIR] [--threads N] [--steps N] [--batch N] [--default-only] [--no-torch]
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

Result run_kx(const kx::Dataset& data, int64_t batch, int threads, int64_t steps, kx::CpuGemm gemm) {
  kx::Strategy s = kx::Strategy::default_strategy();
  s.set_num_threads(threads);
  s.set_cpu_gemm(gemm);
  kx::Model model = kx::bench::fashion_mlp(s);
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
                              const std::vector<int64_t>& batches) {
  std::string args = "--data " + data;
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
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--no-torch") torch = false;
    else if (a == "--default-only") alternatives = false;
    else if (a == "--batch" && i + 1 < argc) batches = {std::atoll(argv[++i])};
    else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--threads N] [--steps N] [--batch N] [--default-only] [--no-torch]\n", argv[0]);
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
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
