// The data pipeline end to end: Fashion-MNIST written out as a PNG folder trains the CNN to the test
// accuracy of the IDX files (with cache and prefetch on), and an image folder larger than the memory
// this process may use trains in it (decoded batch by batch), while caching it in memory does not fit.
// Each test runs in its own process (ctest), the memory test sets RLIMIT_DATA on its own.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data_files.hpp"
#include "image_writer.hpp"
#include "kx/kx.hpp"

namespace kx {
namespace {

namespace fs = std::filesystem;

const char* const kFashion = "/usr/share/datasets/fashion-mnist";

// The CNN of samples/cpp/fashion_mnist_cnn.cpp.
Model fashion_cnn() {
  Model m = Model::sequential(Strategy::default_strategy(), {28, 28, 1});
  m.add_conv2d(32, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_conv2d(64, 3, 3, 1, Padding::Valid, Activation::Relu);
  m.add_max_pool2d(2, 2);
  m.add_flatten();
  m.add_dense(128, Activation::Relu);
  m.add_dense(10, Activation::Softmax);
  CompileOptions co;
  co.loss.kind = LossKind::SparseCategoricalCrossentropy;
  co.accuracy = true;
  co.seed = 3;
  m.compile(co);
  return m;
}

// The first n images of an IDX dataset as PNG files <dir>/<label>/<index>.png, and the same images as
// u8 arrays in the folder's order (class by class, by index): the order the folder dataset reads.
struct Written {
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
};

Written write_png_folder(const Dataset& idx, int64_t n, const fs::path& dir) {
  const DatasetStorage& s = idx.storage();
  std::vector<std::vector<int64_t>> by_class(10);
  for (int64_t i = 0; i < n; ++i) by_class[static_cast<size_t>(s.y[static_cast<size_t>(i)])].push_back(i);
  Written w;
  for (int c = 0; c < 10; ++c) {
    fs::create_directories(dir / std::to_string(c));
    for (int64_t i : by_class[static_cast<size_t>(c)]) {
      std::vector<uint8_t> px(784);
      for (size_t p = 0; p < 784; ++p) px[p] = static_cast<uint8_t>(std::lround(s.x[static_cast<size_t>(i) * 784 + p] * 255.0f));
      char name[32];
      std::snprintf(name, sizeof name, "%d/%05lld.png", c, static_cast<long long>(i));
      test::write_png((dir / name).string(), px, 28, 28, 1);
      w.pixels.insert(w.pixels.end(), px.begin(), px.end());
      w.labels.push_back(c);
    }
  }
  return w;
}

// A subset, not the 70,000 images: two trainings of the CNN on all of them take minutes on CI's two
// cores; 3,000 training images over 2 epochs (the second from the cache) and 1,000 test images do not.
TEST(ImageTraining, FashionMnistAsPngFilesTrainsTheCnnToTheAccuracyOfTheIdxFiles) {
  if (!fs::exists(std::string(kFashion) + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist missing";
  const int64_t n_train = 3000, n_test = 1000;
  test::ScratchDir dir("fashion-png");
  const Dataset train_idx = Dataset::from_idx(std::string(kFashion) + "/train-images-idx3-ubyte.gz",
                                              std::string(kFashion) + "/train-labels-idx1-ubyte.gz");
  const Dataset test_idx = Dataset::from_idx(std::string(kFashion) + "/t10k-images-idx3-ubyte.gz",
                                             std::string(kFashion) + "/t10k-labels-idx1-ubyte.gz");
  const Written train_w = write_png_folder(train_idx, n_train, dir.path() / "train");
  const Written test_w = write_png_folder(test_idx, n_test, dir.path() / "test");

  auto run = [&](Dataset train, Dataset test) {
    train.shuffle(n_train, 7);
    train.batch(64, false);
    test.batch(256, false);
    Model m = fashion_cnn();
    FitOptions fo;
    fo.epochs = 2;
    EXPECT_EQ(m.fit(train, fo, nullptr, nullptr), Status::Ok);
    return m.evaluate(test).accuracy;
  };
  const double from_idx = run(
      Dataset::from_arrays(train_w.pixels.data(), DType::U8, {n_train, 28, 28, 1}, train_w.labels.data(), DType::I32, {n_train}),
      Dataset::from_arrays(test_w.pixels.data(), DType::U8, {n_test, 28, 28, 1}, test_w.labels.data(), DType::I32, {n_test}));
  Dataset train_png = Dataset::from_image_directory((dir.path() / "train").string(), 28, 28, 1);
  Dataset test_png = Dataset::from_image_directory((dir.path() / "test").string(), 28, 28, 1);
  ASSERT_EQ(train_png.num_samples(), n_train);
  ASSERT_EQ(train_png.storage().class_names.size(), 10u);
  train_png.cache((dir.path() / "train.cache").string());
  train_png.prefetch(4);
  test_png.cache("");
  test_png.prefetch(2);
  const double from_png = run(train_png, test_png);
  std::printf("test accuracy: IDX %.4f, PNG folder (cache, prefetch) %.4f\n", from_idx, from_png);
  EXPECT_GT(from_idx, 0.7);
  EXPECT_NEAR(from_png, from_idx, 0.005);
}

// This process's data memory (VmData: what RLIMIT_DATA limits), in bytes.
int64_t vm_data() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmData:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  return -1;
}

TEST(ImageTraining, AFolderLargerThanTheMemoryLimitTrainsBatchByBatch) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory does not fit under a data limit";
#endif
  // 1,600 small PNGs decoded at 96x96x3: 177 MB of float32 samples; the process may use 64 MB more
  // than it held after a warm-up fit (thread stacks, step plans and the pool of OpenMP threads made).
  const int64_t n = 1600, H = 96, W = 96;
  test::ScratchDir dir("big-folder");
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(dir.path() / std::to_string(c));
    for (int64_t i = c; i < n; i += 2) {
      char name[32];
      std::snprintf(name, sizeof name, "%d/%05lld.png", c, static_cast<long long>(i));
      test::write_png((dir.path() / name).string(), test::gradient(24, 24, 3, static_cast<int>(i + c * 2)), 24, 24, 3);
    }
  }
  const int64_t decoded_bytes = n * H * W * 3 * static_cast<int64_t>(sizeof(float));
  Model m = Model::sequential(Strategy::default_strategy(), {H, W, 3});
  m.add_flatten();
  m.add_dense(2, Activation::Softmax);
  CompileOptions co;
  co.loss.kind = LossKind::SparseCategoricalCrossentropy;
  m.compile(co);
  auto data = [&] {
    Dataset d = Dataset::from_image_directory(dir.path().string(), H, W, 3);
    d.shuffle(n, 1);
    d.batch(16, false);
    d.prefetch(2);
    return d;
  };
  Dataset warm = data().take(64);
  ASSERT_EQ(m.fit(warm, FitOptions{}, nullptr, nullptr), Status::Ok);
  const int64_t limit = vm_data() + (int64_t{64} << 20);
  ASSERT_LT(limit - vm_data(), decoded_bytes / 2);
  rlimit r{};
  ASSERT_EQ(getrlimit(RLIMIT_DATA, &r), 0);
  r.rlim_cur = static_cast<rlim_t>(limit);
  ASSERT_EQ(setrlimit(RLIMIT_DATA, &r), 0);

  Dataset streamed = data();
  FitOptions fo;
  fo.epochs = 2;
  EXPECT_EQ(m.fit(streamed, fo, nullptr, nullptr), Status::Ok);
  EXPECT_LE(vm_data(), limit);
  // The control: the same data kept in memory does not fit under the limit.
  Dataset cached = data();
  cached.cache("");
  try {
    m.fit(cached, FitOptions{}, nullptr, nullptr);
    ADD_FAILURE() << "all " << decoded_bytes << " bytes of samples were held under a limit of " << limit;
  } catch (const std::bad_alloc&) {
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::OutOfMemory) << e.what();
  }
}

}  // namespace
}  // namespace kx
