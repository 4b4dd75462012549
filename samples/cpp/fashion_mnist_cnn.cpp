// The Fashion-MNIST CNN with kx's C++ API: Normalization (the training images' mean and variance, as
// Keras's adapt), Conv 32 3x3 relu, MaxPool 2, Conv 64 3x3 relu, MaxPool 2, Flatten, Dropout 0.5,
// Dense 10 softmax; Adam 1e-3 with Keras's moving average of the weights (use_ema, momentum 0.99),
// batch 64, 2 epochs, then test accuracy.
//
//   fashion_mnist_cnn [data_dir] [epochs]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kx/kx.hpp"

int main(int argc, char** argv) try {
  const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 2;
  kx::Dataset train = kx::Dataset::from_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  kx::Dataset test = kx::Dataset::from_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  train.shuffle(train.num_samples(), 42);
  train.batch(64, false);
  test.batch(256, false);
  kx::Model model = kx::Model::sequential(kx::Strategy::default_strategy(), {28, 28, 1});
  model.add_normalization(train.feature_moments(1));
  model.add_conv2d(32, 3, 3, 1, kx::Padding::Valid, kx::Activation::Relu);
  model.add_max_pool2d(2, 2);
  model.add_conv2d(64, 3, 3, 1, kx::Padding::Valid, kx::Activation::Relu);
  model.add_max_pool2d(2, 2);
  model.add_flatten();
  model.add_dropout(0.5f);
  model.add_dense(10, kx::Activation::Softmax);
  kx::CompileOptions co;
  co.accuracy = true;
  co.optimizer.use_ema = true;
  model.compile(co);
  std::printf("model: %lld parameters\n", static_cast<long long>(model.num_params()));
  kx::FitOptions fo;
  fo.epochs = epochs;
  fo.verbose = 1;
  model.fit(train, fo, nullptr, nullptr);
  const kx::EvalResult r = model.evaluate(test);
  std::printf("test loss: %.4f\ntest accuracy: %.4f\n", r.loss, r.accuracy);
  return 0;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
