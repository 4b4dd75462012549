// Mirrored overhead: the Fashion-MNIST MLP (784-256-256-10, Adam) on the same global batch with
// 1 replica using every thread, and with N replicas of threads/N each (the same cores); or, with
// --devices, on the first named device against replicas on every named one (cuda:0,cuda:0 for two
// logical replicas of one GPU, cuda:0,cuda:1 for NCCL). Alternates the two configurations over
// several rounds and prints the median of each, because timings drift.
//
//   bench_mirrored [--data DIR] [--threads N] [--replicas N] [--devices D,D,...] [--batch N] [--steps N]
//                  [--rounds N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kx/kx.hpp"

namespace {

double ms_per_step(const kx::Dataset& data, const std::vector<std::string>& devices, int threads, int64_t batch,
                   int64_t steps) {
  kx::Strategy s = kx::Strategy::mirrored(devices);
  s.set_num_threads(threads);
  kx::Model model = kx::bench::fashion_mlp(s);
  kx::Dataset train = data;
  train.shuffle(train.num_samples(), 1);
  train.batch(batch, true);
  return kx::bench::ms_per_step(model, train, steps, 20);
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(list.substr(start, comma - start));
  out.push_back(list.substr(start));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  // Linked statically, this program finds the module of its own build unless told otherwise.
  setenv("KX_CUDA_MODULE", KX_CUDA_MODULE_PATH, 0);
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int threads = 2, replicas = 2, rounds = 5;
  int64_t batch = 256, steps = 300;
  std::vector<std::string> devices;  // empty: --replicas CPU replicas
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--replicas" && i + 1 < argc) replicas = std::atoi(argv[++i]);
    else if (a == "--devices" && i + 1 < argc) devices = split(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--threads N] [--replicas N] [--devices D,D,...] [--batch N] [--steps N] [--rounds N]\n",
                   argv[0]);
      return 2;
    }
  }
  const kx::Dataset data =
      kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  if (devices.empty()) devices.assign(static_cast<size_t>(std::max(1, replicas)), "cpu");
  std::string names;
  for (const std::string& d : devices) names += (names.empty() ? "" : ",") + d;
  std::printf("kx mirrored overhead: MLP 784-256-256-10, Adam, global batch %lld, %d threads, %lld steps x %d rounds\n",
              static_cast<long long>(batch), threads, static_cast<long long>(steps), rounds);
  std::vector<double> one, many;
  for (int r = 0; r < rounds; ++r) {
    one.push_back(ms_per_step(data, {devices.front()}, threads, batch, steps));
    many.push_back(ms_per_step(data, devices, threads, batch, steps));
  }
  const double a = median(one), b = median(many);
  std::printf("1 replica  (%s)   %8.3f ms/step (median)\n", devices.front().c_str(), a);
  std::printf("%zu replicas (%s) %8.3f ms/step (median)\n", devices.size(), names.c_str(), b);
  std::printf("mirrored overhead: %+.1f %% per step\n", (b / a - 1) * 100);
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
