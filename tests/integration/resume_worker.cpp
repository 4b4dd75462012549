// The training process of the kill-and-resume test: the Fashion-MNIST MLP on 12,000 images for
// 3 epochs, a checkpoint every 50 batches (under the sanitizers, where every step is several times
// slower: 4,000 images, every 20 batches), resuming from the checkpoint directory when it has one;
// at the end it writes the final weights (raw float32) to a file. With fp16, in mixed_float16 from a loss
// scale of 2^24 that doubles every 100 finite steps: the first steps overflow and are skipped, and later
// doublings overflow again, so the scale moves all through the run (and through its checkpoints).
//
//   kx_resume_worker DATA_DIR CHECKPOINT_DIR|- WEIGHTS_OUT [float32|bf16|fp16]
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "kx/kx.hpp"

namespace {
#ifdef KX_TEST_SANITIZED
constexpr int64_t kSamples = 4000, kCheckpointEvery = 20;
#else
constexpr int64_t kSamples = 12000, kCheckpointEvery = 50;
#endif
}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s DATA_DIR CHECKPOINT_DIR|- WEIGHTS_OUT [float32|bf16|fp16]\n", argv[0]);
    return 2;
  }
  const std::string data = argv[1], ckpt = argv[2], out = argv[3], precision = argc == 5 ? argv[4] : "float32";
  kx::Dataset all = kx::Dataset::from_idx(data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz");
  kx::Dataset train = all.take(kSamples);
  train.shuffle(kSamples, 11);
  train.batch(32, false);
  kx::Model model = kx::Model::sequential(kx::Strategy::default_strategy(), {28, 28});
  model.add_flatten();
  model.add_dense(256, kx::Activation::Relu);
  model.add_dropout(0.1f);
  model.add_dense(256, kx::Activation::Relu);
  model.add_dense(10, kx::Activation::Softmax);
  kx::CompileOptions co;
  co.accuracy = true;
  if (precision == "bf16") co.precision = kx::Precision::MixedBfloat16;
  if (precision == "fp16") {
    co.precision = kx::Precision::MixedFloat16;
    co.initial_loss_scale = 0x1p24;
    co.loss_scale_growth_steps = 100;
  }
  model.compile(co);
  kx::Callbacks callbacks;
  kx::FitOptions fo;
  fo.epochs = 3;
  if (ckpt != "-") {
    callbacks.add_model_checkpoint(ckpt + "/ckpt-{step:06d}.kx", kCheckpointEvery, 3);
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
