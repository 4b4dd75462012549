// Writes a few valid kx files into a directory, as the fuzzer's seed corpus: small models with Adam,
// SGD with momentum and plain SGD, and checkpoints taken within an epoch and at its end.
//
//   fuzz_seed_writer DIR
#include <cstdio>
#include <string>
#include <vector>

#include "kx/kx.hpp"

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<float> x(40 * 3), y(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) / 11.0f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 2);
  int n = 0;
  for (kx::OptimizerKind opt : {kx::OptimizerKind::Adam, kx::OptimizerKind::Sgd}) {
    for (double momentum : {0.0, 0.9}) {
      if (opt == kx::OptimizerKind::Adam && momentum != 0) continue;
      kx::Model m = kx::Model::sequential(kx::Strategy::default_strategy(), {3});
      m.add_dense(4, kx::Activation::Relu);
      m.add_dropout(0.5f);
      m.add_dense(2, kx::Activation::Softmax);
      kx::CompileOptions co;
      co.optimizer.kind = opt;
      co.optimizer.momentum = momentum;
      co.accuracy = true;
      m.compile(co);
      kx::Dataset d = kx::Dataset::from_arrays(x.data(), kx::DType::F32, {40, 3}, y.data(), kx::DType::F32, {40});
      d.shuffle(40, 1);
      d.batch(8, false);
      kx::Callbacks cb;
      cb.add_model_checkpoint(dir + "/seed-" + std::to_string(n) + "-{step}.kx", 3, 0);
      m.fit(d, kx::FitOptions{}, &cb, nullptr);
      m.save(dir + "/seed-" + std::to_string(n) + "-model.kx");
      ++n;
    }
  }
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
