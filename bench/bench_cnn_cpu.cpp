// CPU benchmark of the Fashion-MNIST CNN (Conv 32 3x3 relu, MaxPool 2, Conv 64 3x3 relu, MaxPool 2,
// Flatten, Dropout 0.5, Dense 10; Adam) at batch 64, and the same model in PyTorch when /usr/bin/python3
// has torch (default environment and its best one), side by side.
//
// With --precision bf16 (or fp16), kx's float32 and the mixed policy are timed in the same run, and
// PyTorch under torch.autocast("cpu", torch.bfloat16) beside its float32.
//
//   bench_cnn_cpu [--data DIR] [--threads N] [--steps N] [--precision bf16|fp16] [--bf16-gemm dot|fma] [--no-torch]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_common.hpp"
#include "kx/kx.hpp"

namespace {

double kx_ms_per_step(const kx::Dataset& data, int threads, int64_t steps, kx::Precision p = kx::Precision::Float32,
                      kx::CpuBf16Gemm bf16 = kx::CpuBf16Gemm::Auto, std::string* kernel = nullptr) {
  kx::Strategy s = kx::Strategy::default_strategy();
  s.set_num_threads(threads);
  s.set_cpu_bf16_gemm(bf16);
  kx::Model m = kx::bench::fashion_cnn(s, p);
  if (kernel) *kernel = m.gemm_kernel();
  kx::Dataset train = data;
  train.shuffle(train.num_samples(), 1);
  train.batch(64, true);
  return kx::bench::ms_per_step(m, train, steps, 20);
}

// The PyTorch peer's ms/step, or a negative value when torch is missing.
double torch_ms_per_step(const std::string& env, const std::string& data, int threads, int64_t steps,
                         bool autocast = false) {
  std::string args = "--data " + data + (autocast ? " --autocast bf16" : "");
  args.append(" --threads ").append(std::to_string(threads)).append(" --steps ").append(std::to_string(steps));
  const std::vector<double> ms = kx::bench::run_torch(env, "torch_cnn_cpu.py", args);
  return ms.empty() ? -1.0 : ms.front();
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int threads = 2;
  int64_t steps = 200;
  bool torch = true;
  kx::Precision mixed = kx::Precision::Float32;  // float32 alone unless --precision names a mixed policy
  kx::CpuBf16Gemm bf16 = kx::CpuBf16Gemm::Auto;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--no-torch") torch = false;
    else if (a == "--precision" && i + 1 < argc && kx::bench::parse_precision(argv[i + 1], mixed)) ++i;
    else if (a == "--bf16-gemm" && i + 1 < argc) {
      const std::string k = argv[++i];
      bf16 = k == "dot" ? kx::CpuBf16Gemm::Dot : k == "fma" ? kx::CpuBf16Gemm::Fma : kx::CpuBf16Gemm::Auto;
    }
    else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--threads N] [--steps N] [--precision bf16|fp16] [--bf16-gemm dot|fma] [--no-torch]\n", argv[0]);
      return 2;
    }
  }
  const kx::Dataset data =
      kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  std::printf("Fashion-MNIST CNN, batch 64, Adam, %d threads, %lld timed steps\n", threads,
              static_cast<long long>(steps));
  const double kx_ms = kx_ms_per_step(data, threads, steps);
  std::printf("kx     %8.3f ms/step\n", kx_ms);
  double kx_mixed = -1;
  if (mixed != kx::Precision::Float32) {
    std::string kernel;
    kx_mixed = kx_ms_per_step(data, threads, steps, mixed, bf16, &kernel);
    std::printf("kx     %8.3f ms/step %s (gemm: %s), %.2fx float32's speed\n", kx_mixed, kx::precision_name(mixed),
                kernel.c_str(), kx_ms / kx_mixed);
  }
  if (!torch) return 0;
  const double t_default = torch_ms_per_step(kx::bench::kTorchDefaultEnv, dir, threads, steps);
  const double t_best = torch_ms_per_step(kx::bench::kTorchBestEnv, dir, threads, steps);
  if (t_default < 0 || t_best < 0) {
    std::printf("PyTorch: not available (/usr/bin/python3 -c 'import torch' failed); no comparison\n");
    return 0;
  }
  std::printf("torch  %8.3f ms/step (default environment)\ntorch  %8.3f ms/step (best environment)\n", t_default,
              t_best);
  std::printf("kx speed-up over PyTorch's best: %.2fx\n", t_best / kx_ms);
  if (mixed == kx::Precision::MixedBfloat16) {
    const double t_autocast = torch_ms_per_step(kx::bench::kTorchBestEnv, dir, threads, steps, true);
    if (t_autocast < 0)
      std::printf("torch  autocast(\"cpu\", torch.bfloat16) failed in this torch\n");
    else
      std::printf("torch  %8.3f ms/step autocast bf16 (best environment); kx mixed_bfloat16 speed-up %.2fx\n",
                  t_autocast, t_autocast / kx_mixed);
  }
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
