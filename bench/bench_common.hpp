// What the CPU benchmarks share: timing a fit, and running a PyTorch peer script.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kx/kx.hpp"

namespace kx::bench {

// PyTorch's best configuration on these machines: OpenBLAS single-threaded (its threads fight
// PyTorch's OpenMP threads), glibc's malloc thresholds raised (page faults otherwise), no forced core type.
inline const char* const kTorchBestEnv =
    "env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=1000000000000 "
    "MALLOC_TRIM_THRESHOLD_=1000000000000 MALLOC_TOP_PAD_=1073741824";
inline const char* const kTorchDefaultEnv = "env";

// The Fashion-MNIST MLP of the main job, 784-256-256-10 with Adam, compiled on `strategy`.
inline Model fashion_mlp(const Strategy& strategy, Precision precision = Precision::Float32) {
  Model m = Model::sequential(strategy, {784});
  m.add_dense(256, Activation::Relu);
  m.add_dense(256, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.precision = precision;
  m.compile(co);
  return m;
}

// Issue 6's Fashion-MNIST CNN (Conv 32 3x3 relu, MaxPool 2, Conv 64 3x3 relu, MaxPool 2, Flatten,
// Dropout 0.5, Dense 10; Adam), compiled on `strategy`.
inline Model fashion_cnn(const Strategy& strategy, Precision precision = Precision::Float32) {
  Model m = Model::sequential(strategy, {28, 28, 1});
  m.add_conv2d(32, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_conv2d(64, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_flatten();
  m.add_dropout(0.5f);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.accuracy = true;
  co.precision = precision;
  m.compile(co);
  return m;
}

// "float32", "mixed_bfloat16" / "bf16", "mixed_float16" / "fp16"; false for anything else.
inline bool parse_precision(const std::string& s, Precision& p) {
  if (s == "float32" || s == "fp32") p = Precision::Float32;
  else if (s == "mixed_bfloat16" || s == "bf16") p = Precision::MixedBfloat16;
  else if (s == "mixed_float16" || s == "fp16") p = Precision::MixedFloat16;
  else return false;
  return true;
}

// ms per step of `steps` batches of an already compiled model, after `warmup` batches.
inline double ms_per_step(Model& m, Dataset& train, int64_t steps, int64_t warmup) {
  FitOptions warm;
  warm.steps_per_epoch = warmup;
  m.fit(train, warm, nullptr, nullptr);
  FitOptions fo;
  fo.steps_per_epoch = steps;
  const auto t0 = std::chrono::steady_clock::now();
  m.fit(train, fo, nullptr, nullptr);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(steps);
}

// Runs `/usr/bin/python3 KX_BENCH_DIR/script args` in env; returns the ms/step of each
// "torch batch=B ms_per_step=X" line, and echoes its other "torch ..." lines. Empty without torch.
inline std::vector<double> run_torch(const std::string& env, const std::string& script, const std::string& args) {
  std::string cmd = env;
  cmd.append(" /usr/bin/python3 " KX_BENCH_DIR "/").append(script).append(" ").append(args).append(" 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::vector<double> out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    double batch = 0, ms = 0;
    if (std::sscanf(line, "torch batch=%lf ms_per_step=%lf", &batch, &ms) == 2)
      out.push_back(ms);
    else if (std::strncmp(line, "torch ", 6) == 0)
      std::printf("  %s", line);
  }
  pclose(p);
  return out;
}

}  // namespace kx::bench
