// Mirrored overhead: the Fashion-MNIST MLP (784-256-256-10, Adam) on the same global batch with
// 1 replica using every thread, and with N replicas of threads/N each (the same cores). Alternates the
// two configurations over several rounds and prints the median of each, because this machine's
// timings drift.
//
//   bench_mirrored [--data DIR] [--threads N] [--replicas N] [--batch N] [--steps N] [--rounds N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kx/kx.hpp"

namespace {

double ms_per_step(const kx::Dataset& data, int replicas, int threads, int64_t batch, int64_t steps) {
  kx::Strategy s = kx::Strategy::mirrored(std::vector<std::string>(static_cast<size_t>(replicas), "cpu"));
  s.set_num_threads(threads);
  kx::Model model = kx::bench::fashion_mlp(s);
  kx::Dataset train = data;
  train.shuffle(train.num_samples(), 1);
  train.batch(batch, true);
  return kx::bench::ms_per_step(model, train, steps, 20);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  int threads = 2, replicas = 2, rounds = 5;
  int64_t batch = 256, steps = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--replicas" && i + 1 < argc) replicas = std::atoi(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--threads N] [--replicas N] [--batch N] [--steps N] [--rounds N]\n",
                   argv[0]);
      return 2;
    }
  }
  const kx::Dataset data =
      kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  std::printf("kx mirrored overhead: MLP 784-256-256-10, Adam, global batch %lld, %d threads, %lld steps x %d rounds\n",
              static_cast<long long>(batch), threads, static_cast<long long>(steps), rounds);
  std::vector<double> one, many;
  for (int r = 0; r < rounds; ++r) {
    one.push_back(ms_per_step(data, 1, threads, batch, steps));
    many.push_back(ms_per_step(data, replicas, threads, batch, steps));
  }
  const double a = median(one), b = median(many);
  std::printf("1 replica  x %d threads   %8.3f ms/step (median)\n", threads, a);
  std::printf("%d replicas x %d thread(s) %8.3f ms/step (median)\n", replicas, std::max(1, threads / replicas), b);
  std::printf("mirrored overhead: %+.1f %% per step\n", (b / a - 1) * 100);
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
