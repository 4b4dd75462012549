// The data pipeline's speed: an image folder of JPEG files (written here with libjpeg) read by fit
//   1. images/s decoded with prefetch off and on (a tiny model, so decoding is what is measured);
//   2. seed 002's 150x150x3 CNN: ms per step from memory (the same pixels as arrays), from the folder
//      decoded on demand without prefetch, and with prefetch (target: as fast as memory while
//      decoding a batch takes less than a step).
//
//   bench_data_pipeline [images=256] [steps=6] [prefetch=4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "image_writer.hpp"
#include "kx/kx.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Seed 002's model (samples/c/image_cnn.c): four Conv2D+MaxPool blocks, Dropout, Dense 512, sigmoid.
kx::Model seed002_cnn() {
  kx::Model m = kx::Model::sequential(kx::Strategy::default_strategy(), {150, 150, 3});
  for (int64_t filters : {32, 64, 128, 128}) {
    m.add_conv2d(filters, 3, 3, 1, kx::Padding::Valid, kx::Activation::Relu);
    m.add_max_pool2d(2, 2);
  }
  m.add_flatten();
  m.add_dropout(0.5f);
  m.add_dense(512, kx::Activation::Relu);
  m.add_dense(1, kx::Activation::Sigmoid);
  kx::CompileOptions co;
  co.optimizer.learning_rate = 1e-4;  // seed 002 uses RMSprop(1e-4); kx has Adam
  co.loss.kind = kx::LossKind::BinaryCrossentropy;
  m.compile(co);
  return m;
}

kx::Model tiny(const kx::Shape& input) {
  kx::Model m = kx::Model::sequential(kx::Strategy::default_strategy(), input);
  m.add_flatten();
  m.add_dense(1, kx::Activation::Sigmoid);
  kx::CompileOptions co;
  co.loss.kind = kx::LossKind::BinaryCrossentropy;
  m.compile(co);
  return m;
}

// Seconds for `steps` steps of fit (after one warm-up step): the best of three runs, the machine's
// other load being what varies between them.
double fit_seconds(kx::Model& m, kx::Dataset& d, int64_t steps) {
  kx::FitOptions warm;
  warm.steps_per_epoch = 1;
  m.fit(d, warm, nullptr, nullptr);
  kx::FitOptions fo;
  fo.steps_per_epoch = steps;
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = Clock::now();
    m.fit(d, fo, nullptr, nullptr);
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) try {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 6;
  const int32_t prefetch = argc > 3 ? std::atoi(argv[3]) : 4;
  const int64_t batch = 32;
  const fs::path dir = fs::temp_directory_path() / ("kx-bench-images-" + std::to_string(getpid()));
  fs::remove_all(dir);
  // Photos are larger than the model's input: 200x200 JPEGs (quality 90), resized to 150x150 on decode.
  for (int c = 0; c < 2; ++c) fs::create_directories(dir / (c == 0 ? "cats" : "dogs"));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<uint8_t> px = kx::test::gradient(200, 200, 3, static_cast<int>(i));
    for (size_t p = 0; p < px.size(); ++p) px[p] = static_cast<uint8_t>(px[p] + (p * 131 + i * 7) % 23);
    const fs::path file = dir / (i % 2 ? "dogs" : "cats") / (std::to_string(i) + ".jpg");
    kx::test::write_jpeg(file.string(), px, 200, 200, 3, 90);
  }
  std::printf("folder: %lld JPEG files of 200x200x3, decoded to 150x150x3, batch %lld, %lld steps\n",
              static_cast<long long>(n), static_cast<long long>(batch), static_cast<long long>(steps));
  auto folder = [&](int32_t depth) {
    kx::Dataset d = kx::Dataset::from_image_directory(dir.string(), 150, 150, 3);
    d.shuffle(n, 1);
    d.batch(batch, true);
    d.prefetch(depth);
    return d;
  };

  // 1. Decoding throughput: a model that costs next to nothing per step.
  for (int32_t depth : {0, prefetch}) {
    kx::Dataset d = folder(depth);
    kx::Model m = tiny({150, 150, 3});
    const double s = fit_seconds(m, d, steps);
    std::printf("decode: prefetch %d: %.1f images/s\n", depth, static_cast<double>(steps * batch) / s);
  }

  // 2. Seed 002's CNN: memory against the folder without and with prefetch.
  // In memory: the same decoded pixels as float32 arrays.
  kx::Dataset decoded = folder(0);
  const int64_t per = 150 * 150 * 3;
  std::vector<float> x(static_cast<size_t>(n * per));
  for (int64_t i = 0; i < n; ++i) decoded.read_sample(i, 0, x.data() + i * per);
  kx::Dataset in_memory = kx::Dataset::from_arrays(x.data(), kx::DType::F32, {n, 150, 150, 3},
                                                   decoded.storage().y.data(), kx::DType::F32, {n});
  in_memory.shuffle(n, 1);
  in_memory.batch(batch, true);
  const auto decode_t0 = Clock::now();
  {
    kx::Dataset d = folder(0);
    kx::Model m = tiny({150, 150, 3});
    kx::FitOptions one;
    one.steps_per_epoch = 1;
    m.fit(d, one, nullptr, nullptr);
  }
  const double decode_batch_ms = 1000.0 * seconds_since(decode_t0);
  for (const char* what : {"memory", "folder, prefetch 0", "folder, prefetch on"}) {
    kx::Dataset d = what[0] == 'm' ? in_memory : folder(what[15] == '0' ? 0 : prefetch);
    kx::Model m = seed002_cnn();
    const double s = fit_seconds(m, d, steps);
    std::printf("seed 002 CNN, %s: %.1f ms/step\n", what, 1000.0 * s / static_cast<double>(steps));
  }
  std::printf("one batch decoded without prefetch (with a tiny step): %.1f ms\n", decode_batch_ms);
  fs::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
