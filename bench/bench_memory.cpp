// Peak resident memory of a process that trains one workload for N steps, and what kx plans for it:
// the training memory report (weights, their gradients, optimizer slots, the step plan's arena) beside
// the arena without buffer reuse. RSS is read at each stage (after the data, the model, compile, the
// first step, the last), peak RSS from getrusage at the end.
//
//   bench_memory [--model resnet50|cnn|mlp] [--batch N] [--steps N] [--threads N] [--samples N]
//                [--data DIR] [--no-reuse]
//
// resnet50: Keras's ResNet50 at 64x64x3, 10 classes, random samples (--samples, default batch * 4);
// cnn and mlp: the Fashion-MNIST models of the other benches, on its 60000 training images. Adam.
// --no-reuse trains with every buffer of the step plan apart (the test hook), to measure what reuse saves.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "config/test_hooks.hpp"
#include "kx/applications.hpp"
#include "kx/kx.hpp"

namespace {

using namespace kx;

double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// VmRSS of this process, in bytes.
int64_t current_rss() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      f >> kb;
      return kb * 1024;
    }
    f.ignore(4096, '\n');
  }
  return 0;
}

int64_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

void stage(const char* what) { std::printf("  rss %-22s %8.1f MB\n", what, mb(current_rss())); }

Dataset random_images(int64_t samples, const Shape& sample, int64_t classes) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(static_cast<size_t>(samples * num_elements(sample))), y(static_cast<size_t>(samples));
  for (auto& v : x) v = u(gen);
  for (auto& v : y) v = static_cast<float>(gen() % classes);
  Shape shape{samples};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return Dataset::from_arrays(x.data(), DType::F32, shape, y.data(), DType::F32, {samples, 1});
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model = "resnet50", dir = "/usr/share/datasets/fashion-mnist";
  int64_t batch = 0, steps = 20, samples = 0;
  int threads = 2;
  bool reuse = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) model = argv[++i];
    else if (a == "--batch" && i + 1 < argc) batch = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--samples" && i + 1 < argc) samples = std::atoll(argv[++i]);
    else if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--no-reuse") reuse = false;
    else {
      std::fprintf(stderr,
                   "usage: %s [--model resnet50|cnn|mlp] [--batch N] [--steps N] [--threads N] [--samples N] "
                   "[--data DIR] [--no-reuse]\n",
                   argv[0]);
      return 2;
    }
  }
  if (batch <= 0) batch = model == "resnet50" ? 16 : model == "cnn" ? 64 : 32;
  config::test_hooks().no_arena_reuse = !reuse;
  std::printf("%s, batch %lld, Adam, %d threads, %lld steps%s\n", model.c_str(), static_cast<long long>(batch),
              threads, static_cast<long long>(steps), reuse ? "" : ", no buffer reuse");
  stage("at start");
  Strategy s = Strategy::default_strategy();
  s.set_num_threads(threads);
  Dataset train = model == "resnet50"
                      ? random_images(samples > 0 ? samples : batch * 4, {64, 64, 3}, 10)
                      : Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  stage("data loaded");
  Model m = model == "resnet50" ? applications::resnet50(s, {64, 64, 3}, true, 10)
            : model == "cnn"    ? Model::sequential(s, {28, 28, 1})
                                : Model::sequential(s, {784});
  if (model == "resnet50") {
    CompileOptions co;
    co.accuracy = true;
    m.compile(co);
  } else {
    m = model == "cnn" ? bench::fashion_cnn(s) : bench::fashion_mlp(s);
  }
  stage("model compiled");
  const TrainingMemory r = m.training_memory(batch);
  std::printf("  plan: weights %.1f MB, weight gradients %.1f MB, optimizer slots %.1f MB, step arena %.1f MB, "
              "scratch %.1f MB, batch %.1f MB: %.1f MB\n",
              mb(r.weights), mb(r.weight_gradients), mb(r.optimizer_slots), mb(r.step_arena), mb(r.scratch),
              mb(r.batch_buffers), mb(r.total()));
  std::printf("  plan: step arena without reuse %.1f MB (activations %.1f, layer gradients %.1f, workspace %.1f)\n",
              mb(r.step_arena_without_reuse), mb(r.activations), mb(r.layer_gradients), mb(r.workspace));
  train.batch(batch, true);
  FitOptions first;
  first.steps_per_epoch = 1;
  m.fit(train, first, nullptr, nullptr);
  stage("first step");
  FitOptions rest;
  rest.steps_per_epoch = steps - 1;
  const auto t0 = std::chrono::steady_clock::now();
  if (steps > 1) m.fit(train, rest, nullptr, nullptr);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stage("last step");
  if (steps > 1) std::printf("  %.1f ms per step after the first (shared cores: indicative)\n", ms / (steps - 1));
  std::printf("  peak rss %.1f MB\n", mb(peak_rss()));
  // The trained weights' bytes hashed (FNV-1a): equal with and without --no-reuse.
  uint64_t hash = 1469598103934665603ull;
  for (float v : m.get_weights()) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int b = 0; b < 4; ++b) hash = (hash ^ ((bits >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  std::printf("  weights hash %016llx\n", static_cast<unsigned long long>(hash));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_memory: %s\n", e.what());
  return 1;
}
