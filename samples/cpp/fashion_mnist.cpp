// Fashion-MNIST with kx's C++ API: the same MLP as samples/c, with a callback that prints each epoch.
//   fashion_mnist_cpp [data_dir] [epochs]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kx/kx.hpp"

int main(int argc, char** argv) try {
  const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 2;

  kx::Strategy strategy = kx::Strategy::default_strategy();
  kx::Dataset all = kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  kx::Dataset train = all.take(50000);
  kx::Dataset val = all.skip(50000);
  train.shuffle(50000, 42);
  train.batch(32, false);
  val.batch(256, false);
  kx::Dataset test = kx::Dataset::from_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  test.batch(256, false);

  kx::Model model = kx::Model::sequential(strategy, {28, 28});
  model.add_flatten();
  model.add_dense(256, kx::Activation::Relu);
  model.add_dense(256, kx::Activation::Relu);
  model.add_dense(10, kx::Activation::Softmax);
  kx::CompileOptions co;
  co.optimizer.kind = kx::OptimizerKind::Adam;
  co.optimizer.learning_rate = 1e-3;
  co.loss.kind = kx::LossKind::SparseCategoricalCrossentropy;
  co.accuracy = true;
  model.compile(co);

  kx::Callbacks callbacks;
  callbacks.add([](const kx::Event& e) {
    if (e.kind == kx::EventKind::EpochEnd)
      std::printf("epoch %d: loss %.4f accuracy %.4f val_loss %.4f val_accuracy %.4f\n", e.epoch + 1, e.loss,
                  e.accuracy, e.val_loss, e.val_accuracy);
    return false;
  });
  kx::FitOptions fo;
  fo.epochs = epochs;
  fo.validation = &val;
  kx::History history;
  model.fit(train, fo, &callbacks, &history);
  const kx::EvalResult r = model.evaluate(test);
  std::printf("test loss: %.4f\ntest accuracy: %.4f\n", r.loss, r.accuracy);
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
