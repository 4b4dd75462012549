// The CUDA backend against PyTorch on the same GPU: µs per training step of the Fashion-MNIST MLP at
// batch 32, 256 and 2048, and TFLOP/s of a 4 x Linear(4096) MLP at batch 8192 in float32 and TF32.
// Random data resident on the device. Prints "no CUDA device" and the reason on machines without one.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace kx;

Dataset random_resident_data(int64_t samples, int64_t features, int64_t classes) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(static_cast<size_t>(samples * features)), y(static_cast<size_t>(samples));
  for (auto& v : x) v = u(gen);
  for (auto& v : y) v = static_cast<float>(gen() % classes);
  return Dataset::from_arrays(x.data(), DType::F32, {samples, features}, y.data(), DType::F32, {samples, 1});
}

Model wide_mlp(const Strategy& s) {
  Model m = Model::sequential(s, {4096});
  for (int i = 0; i < 4; ++i) m.add_dense(4096, i < 3 ? Activation::Relu : Activation::Softmax);
  CompileOptions co;
  m.compile(co);
  return m;
}

double us_per_step(Model& m, Dataset& d, int64_t steps) { return 1000.0 * bench::ms_per_step(m, d, steps, 20); }

}  // namespace

int main(int argc, char** argv) {
  // Linked statically, this program finds the module of its own build unless told otherwise.
  setenv("KX_CUDA_MODULE", KX_CUDA_MODULE_PATH, 0);
  int64_t steps = 500;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--steps") steps = std::atoll(argv[i + 1]);
  if (device_count(DeviceKind::Cuda) == 0) {
    std::printf("no CUDA device: %s\n", device_status(DeviceKind::Cuda).c_str());
    return 0;
  }
  std::printf("%s\n", device_status(DeviceKind::Cuda).c_str());
  for (int64_t batch : {32, 256, 2048}) {
    Strategy s = Strategy::default_strategy();
    Model m = bench::fashion_mlp(s);
    Dataset d = random_resident_data(std::max<int64_t>(batch * 8, 4096), 784, 10);
    d.batch(batch, true);
    std::printf("kx model=mlp precision=tf32 batch=%lld us_per_step=%.1f\n", static_cast<long long>(batch),
                us_per_step(m, d, steps));
  }
  const double wide_flops = 6.0 * 8192 * 4 * 4096.0 * 4096.0;
  for (bool tf32 : {false, true}) {
    Strategy s = Strategy::default_strategy();
    s.set_tf32(tf32);
    Model m = wide_mlp(s);
    Dataset d = random_resident_data(8192 * 2, 4096, 4096);
    d.batch(8192, true);
    const double us = us_per_step(m, d, std::max<int64_t>(20, steps / 10));
    std::printf("kx model=wide precision=%s batch=8192 us_per_step=%.1f tflops=%.1f\n", tf32 ? "tf32" : "fp32", us,
                wide_flops / (us * 1e-6) / 1e12);
  }
  std::fflush(stdout);
  const std::string cmd = "/usr/bin/python3 " KX_BENCH_DIR "/torch_gpu.py --steps " + std::to_string(steps);
  return std::system(cmd.c_str()) == 0 ? 0 : 1;
}
