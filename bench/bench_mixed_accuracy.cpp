// Mixed precision's accuracy: the Fashion-MNIST MLP and CNN of the CPU benchmarks trained for 2
// epochs (batch 32, Adam, seeded) in float32 and in a mixed policy, and their test accuracies side by
// side (issue 18: within 0.01 of float32). Too long for CI (a few minutes on 2 cores): run it by hand.
//
//   bench_mixed_accuracy [--data DIR] [--threads N] [--epochs N] [--precision bf16|fp16] [--model mlp|cnn|both]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_common.hpp"
#include "kx/kx.hpp"

namespace {

double test_accuracy(bool cnn, kx::Precision p, const kx::Dataset& train_all, const kx::Dataset& test, int threads,
                     int epochs, double* seconds) {
  kx::Strategy s = kx::Strategy::default_strategy();
  s.set_num_threads(threads);
  kx::Model m = cnn ? kx::bench::fashion_cnn(s, p) : kx::bench::fashion_mlp(s, p);
  kx::Dataset train = train_all;
  train.shuffle(train.num_samples(), 7);
  train.batch(32, false);
  kx::FitOptions fo;
  fo.epochs = epochs;
  const auto t0 = std::chrono::steady_clock::now();
  m.fit(train, fo, nullptr, nullptr);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kx::Dataset t = test;
  t.batch(256, false);
  return m.evaluate(t).accuracy;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir = "/usr/share/datasets/fashion-mnist", which = "both";
  int threads = 2, epochs = 2;
  kx::Precision mixed = kx::Precision::MixedBfloat16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--epochs" && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (a == "--model" && i + 1 < argc) which = argv[++i];
    else if (a == "--precision" && i + 1 < argc && kx::bench::parse_precision(argv[i + 1], mixed)) ++i;
    else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--threads N] [--epochs N] [--precision bf16|fp16] [--model mlp|cnn|both]\n", argv[0]);
      return 2;
    }
  }
  const kx::Dataset train =
      kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  const kx::Dataset test = kx::Dataset::from_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  std::printf("Fashion-MNIST, %d epochs, batch 32, Adam, %d threads: test accuracy, float32 against %s\n", epochs,
              threads, kx::precision_name(mixed));
  for (const bool cnn : {false, true}) {
    if ((cnn && which == "mlp") || (!cnn && which == "cnn")) continue;
    double s32 = 0, s16 = 0;
    const double a32 = test_accuracy(cnn, kx::Precision::Float32, train, test, threads, epochs, &s32);
    const double a16 = test_accuracy(cnn, mixed, train, test, threads, epochs, &s16);
    std::printf("%-4s float32 %.4f (%.1f s)  %s %.4f (%.1f s)  difference %+.4f\n", cnn ? "CNN" : "MLP", a32, s32,
                kx::precision_name(mixed), a16, s16, a16 - a32);
  }
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
