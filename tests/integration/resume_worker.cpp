// The training process of the kill-and-resume test: the Fashion-MNIST MLP on 12,000 images for
// 3 epochs, a checkpoint every 50 batches, resuming from the checkpoint directory when it has one;
// at the end it writes the final weights (raw float32) to a file.
//
//   kx_resume_worker DATA_DIR CHECKPOINT_DIR|- WEIGHTS_OUT
#include <cstdio>
#include <fstream>
#include <string>

#include "kx/kx.hpp"

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DATA_DIR CHECKPOINT_DIR|- WEIGHTS_OUT\n", argv[0]);
    return 2;
  }
  const std::string data = argv[1], ckpt = argv[2], out = argv[3];
  kx::Dataset all = kx::Dataset::from_idx(data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz");
  kx::Dataset train = all.take(12000);
  train.shuffle(12000, 11);
  train.batch(32, false);
  kx::Model model = kx::Model::sequential(kx::Strategy::default_strategy(), {28, 28});
  model.add_flatten();
  model.add_dense(256, kx::Activation::Relu);
  model.add_dropout(0.1f);
  model.add_dense(256, kx::Activation::Relu);
  model.add_dense(10, kx::Activation::Softmax);
  kx::CompileOptions co;
  co.accuracy = true;
  model.compile(co);
  kx::Callbacks callbacks;
  kx::FitOptions fo;
  fo.epochs = 3;
  if (ckpt != "-") {
    callbacks.add_model_checkpoint(ckpt + "/ckpt-{step:06d}.kx", 50, 3);
    fo.resume_from = ckpt;
  }
  model.fit(train, fo, &callbacks, nullptr);
  const std::vector<float> w = model.get_weights();
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
  return f.good() ? 0 : 1;
} catch (const kx::Error& e) {
  std::fprintf(stderr, "error %d: %s\n", static_cast<int>(e.status()), e.what());
  return 1;
}
