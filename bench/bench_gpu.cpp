// The CUDA backend against PyTorch on the same GPU: µs per training step of the Fashion-MNIST MLP at
// batch 32, 256 and 2048, TFLOP/s of a 4 x Linear(4096) MLP at batch 8192 in float32 and TF32, µs
// per step of issue 6's Fashion-MNIST CNN at batch 64, and ResNet50 images/s at batch 64 (224x224x3,
// 1000 classes, SGD with momentum) and MobileNetV2's (alpha 1.0, same input and optimizer) against
// torchvision's resnet50 and mobilenet_v2. Random data resident on the device. Prints "no CUDA device" and the reason on machines without one.
//
//   bench_gpu [--steps N] [--cases mlp,wide,cnn,resnet50,mobilenetv2] [--cpu-smoke] [--no-peers]
//
// --cpu-smoke runs the kx side on the CPU when there is no GPU (to check the program, not to time
// anything) and skips PyTorch. --no-peers skips PyTorch too, for a caller that runs torch_gpu.py with
// another Python (scripts/run_gpu_checks.sh, where PyTorch is not /usr/bin/python3's).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace kx;

// `samples` random samples of shape `sample` with labels below `classes`.
Dataset random_resident_data(int64_t samples, const Shape& sample, int64_t classes) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(static_cast<size_t>(samples * num_elements(sample))), y(static_cast<size_t>(samples));
  for (auto& v : x) v = u(gen);
  for (auto& v : y) v = static_cast<float>(gen() % classes);
  Shape shape{samples};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return Dataset::from_arrays(x.data(), DType::F32, shape, y.data(), DType::F32, {samples, 1});
}

Model wide_mlp(const Strategy& s) {
  Model m = Model::sequential(s, {4096});
  for (int i = 0; i < 4; ++i) m.add_dense(4096, i < 3 ? Activation::Relu : Activation::Softmax);
  CompileOptions co;
  m.compile(co);
  return m;
}

double us_per_step(Model& m, Dataset& d, int64_t steps) { return 1000.0 * bench::ms_per_step(m, d, steps, 20); }

// An ImageNet-sized model's step as torchvision's are timed: SGD with momentum, 224x224x3 samples of
// 1000 classes, batch 64, at least 10 steps.
double imagenet_us_per_step(Model m, int64_t steps) {
  CompileOptions co;
  co.optimizer.kind = OptimizerKind::Sgd;
  co.optimizer.learning_rate = 0.1;
  co.optimizer.momentum = 0.9;
  m.compile(co);
  Dataset d = random_resident_data(64 * 2, {224, 224, 3}, 1000);
  d.batch(64, true);
  return us_per_step(m, d, std::max<int64_t>(10, steps));
}

}  // namespace

int main(int argc, char** argv) {
  // Linked statically, this program finds the module of its own build unless told otherwise.
  setenv("KX_CUDA_MODULE", KX_CUDA_MODULE_PATH, 0);
  int64_t steps = 500;
  std::string cases = "mlp,wide,cnn,resnet50,mobilenetv2";
  bool cpu_smoke = false, peers = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cpu-smoke") {
      cpu_smoke = true;
    } else if (arg == "--no-peers") {
      peers = false;
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::atoll(argv[++i]);
    } else if (arg == "--cases" && i + 1 < argc) {
      cases = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--steps N] [--cases mlp,wide,cnn,resnet50,mobilenetv2] [--cpu-smoke] [--no-peers]\n",
                   argv[0]);
      return 2;
    }
  }
  if (steps <= 0) {
    std::fprintf(stderr, "--steps needs a positive number\n");
    return 2;
  }
  const auto wanted = [&](const std::string& name) {
    size_t at = 0;  // a whole entry of the comma-separated list
    while ((at = cases.find(name, at)) != std::string::npos) {
      const size_t end = at + name.size();
      if ((at == 0 || cases[at - 1] == ',') && (end == cases.size() || cases[end] == ',')) return true;
      at = end;
    }
    return false;
  };
  if (device_count(DeviceKind::Cuda) == 0) {
    std::printf("no CUDA device: %s\n", device_status(DeviceKind::Cuda).c_str());
    if (!cpu_smoke) return 0;
  }
  std::printf("%s\n", device_status(DeviceKind::Cuda).c_str());
  for (int64_t batch : {32, 256, 2048}) {
    if (!wanted("mlp")) break;
    Strategy s = Strategy::default_strategy();
    Model m = bench::fashion_mlp(s);
    Dataset d = random_resident_data(std::max<int64_t>(batch * 8, 4096), {784}, 10);
    d.batch(batch, true);
    std::printf("kx model=mlp precision=tf32 batch=%lld us_per_step=%.1f\n", static_cast<long long>(batch),
                us_per_step(m, d, steps));
  }
  const double wide_flops = 6.0 * 8192 * 4 * 4096.0 * 4096.0;
  for (bool tf32 : {false, true}) {
    if (!wanted("wide")) break;
    Strategy s = Strategy::default_strategy();
    s.set_tf32(tf32);
    Model m = wide_mlp(s);
    Dataset d = random_resident_data(8192 * 2, {4096}, 4096);
    d.batch(8192, true);
    const double us = us_per_step(m, d, std::max<int64_t>(20, steps / 10));
    std::printf("kx model=wide precision=%s batch=8192 us_per_step=%.1f tflops=%.1f\n", tf32 ? "tf32" : "fp32", us,
                wide_flops / (us * 1e-6) / 1e12);
  }
  if (wanted("cnn")) {
    Strategy s = Strategy::default_strategy();
    Model m = bench::fashion_cnn(s);
    Dataset d = random_resident_data(64 * 16, {28, 28, 1}, 10);
    d.batch(64, true);
    std::printf("kx model=cnn precision=tf32 batch=64 us_per_step=%.1f\n", us_per_step(m, d, steps));
  }
  if (wanted("resnet50")) {
    Strategy s = Strategy::default_strategy();
    const double us = imagenet_us_per_step(applications::resnet50(s, {224, 224, 3}, true, 1000), steps / 20);
    std::printf("kx model=resnet50 precision=tf32 batch=64 us_per_step=%.1f images_per_s=%.1f\n", us, 64 / (us * 1e-6));
  }
  if (wanted("mobilenetv2")) {
    Strategy s = Strategy::default_strategy();
    applications::MobileNetV2Options options;
    options.input_shape = {224, 224, 3};
    const double us = imagenet_us_per_step(applications::mobilenet_v2(s, options), steps / 10);
    std::printf("kx model=mobilenetv2 precision=tf32 batch=64 us_per_step=%.1f images_per_s=%.1f\n", us,
                64 / (us * 1e-6));
  }
  std::fflush(stdout);
  std::string torch_cases;
  for (const char* c : {"mlp:32,mlp:256,mlp:2048", "wide:8192", "cnn:64", "resnet50:64", "mobilenetv2:64"}) {
    const std::string name = std::string(c).substr(0, std::string(c).find(':'));
    if (wanted(name)) torch_cases += (torch_cases.empty() ? "" : ",") + std::string(c);
  }
  if (!peers || torch_cases.empty() || device_count(DeviceKind::Cuda) == 0) return 0;
  const std::string cmd = "/usr/bin/python3 " KX_BENCH_DIR "/torch_gpu.py --steps " + std::to_string(steps) +
                          " --cases " + torch_cases;
  return std::system(cmd.c_str()) == 0 ? 0 : 1;
}
