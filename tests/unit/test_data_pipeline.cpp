// The decoded-data pipeline in fit: an image folder trains exactly as the same pixels in memory, with
// or without prefetch and cache (memory or file, the file reused by a later run); a resumed fit sees
// the same (augmented) batches; a decoding failure stops fit naming the file, and an early stop leaves
// no thread behind; augmentation maps are seeded per sample and pass.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "core/model/model_impl.hpp"
#include "data/sample_cache.hpp"
#include "data_files.hpp"
#include "kx/kx.hpp"
#include "reference.hpp"

#ifdef KX_TEST_HAVE_IMAGES
#include "image_writer.hpp"
#endif

namespace kx {
namespace {

namespace fs = std::filesystem;

// Samples that are their index (every value), counting how often each is decoded.
class CountingSource final : public SampleSource {
 public:
  explicit CountingSource(int64_t n, int64_t floats) : floats_(floats), reads_(static_cast<size_t>(n)) {}
  void read(int64_t index, float* out) const override {
    reads_[static_cast<size_t>(index)]++;
    for (int64_t i = 0; i < floats_; ++i) out[i] = static_cast<float>(index % 7) / 7.0f + static_cast<float>(i) * 0.01f;
  }
  std::string identity() const override { return "counting " + std::to_string(reads_.size()); }
  int64_t reads(int64_t i) const { return reads_[static_cast<size_t>(i)]; }
  int64_t total() const {
    int64_t t = 0;
    for (const auto& r : reads_) t += r;
    return t;
  }

 private:
  int64_t floats_;
  mutable std::vector<std::atomic<int64_t>> reads_;
};

Model small_mlp(const Shape& input, int64_t classes) {
  Model m = Model::sequential(Strategy::default_strategy(), input);
  m.add_flatten();
  m.add_dense(8, Activation::Relu);
  m.add_dense(classes, Activation::Softmax);
  CompileOptions co;
  co.loss.kind = LossKind::SparseCategoricalCrossentropy;
  co.accuracy = true;
  co.seed = 5;
  m.compile(co);
  return m;
}

std::vector<float> labels(int64_t n, int64_t classes) {
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(i % classes);
  return y;
}

TEST(DataPipeline, PrefetchAndCacheDecodeEachSampleAsOftenAsTheyShould) {
  const int64_t n = 40;
  for (int32_t prefetch : {0, 3}) {
    for (bool cached : {false, true}) {
      SCOPED_TRACE(testing::Message() << "prefetch " << prefetch << (cached ? ", cached" : ""));
      auto source = std::make_shared<CountingSource>(n, 6);
      Dataset d = Dataset::from_source(source, {6}, labels(n, 3), {});
      d.batch(8, false);
      d.shuffle(n, 11);
      d.prefetch(prefetch);
      if (cached) d.cache("");
      Model m = small_mlp({6}, 3);
      FitOptions fo;
      fo.epochs = 3;
      ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
      // Without a cache, every epoch decodes every sample once (prefetch looks at most a few batches
      // past the end); with it, each sample is decoded once.
      for (int64_t i = 0; i < n; ++i) {
        if (cached) {
          ASSERT_EQ(source->reads(i), 1) << i;
        } else {
          ASSERT_GE(source->reads(i), 3) << i;
        }
      }
      if (!cached) {
        EXPECT_LE(source->total(), 3 * n + (prefetch + 1) * 8);
      }
    }
  }
}

TEST(DataPipeline, ADecodedDatasetTrainsExactlyAsTheSameSamplesInMemory) {
  const int64_t n = 50;
  auto source = std::make_shared<CountingSource>(n, 6);
  std::vector<float> x(static_cast<size_t>(n * 6));
  for (int64_t i = 0; i < n; ++i) source->read(i, x.data() + i * 6);
  const std::vector<float> y = labels(n, 3);
  auto fit = [&](Dataset d, int32_t prefetch) {
    d.batch(8, false);
    d.shuffle(20, 3);
    d.prefetch(prefetch);
    Model m = small_mlp({6}, 3);
    FitOptions fo;
    fo.epochs = 2;
    EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
    return m.get_weights();
  };
  const std::vector<float> in_memory = fit(Dataset::from_arrays(x.data(), DType::F32, {n, 6}, y.data(), DType::F32, {n}), 0);
  EXPECT_EQ(fit(Dataset::from_source(source, {6}, y, {}), 0), in_memory);
  EXPECT_EQ(fit(Dataset::from_source(source, {6}, y, {}), 2), in_memory);
  Dataset d = Dataset::from_source(source, {6}, y, {});
  d.prefetch(1);
  Model m = small_mlp({6}, 3);
  m.set_weights(in_memory);
  Dataset arrays = Dataset::from_arrays(x.data(), DType::F32, {n, 6}, y.data(), DType::F32, {n});
  EXPECT_EQ(m.evaluate(d).loss, m.evaluate(arrays).loss);
}

// Worker w of a multi-worker job (global replicas replica_offset.. of total_replicas) decodes only its
// replicas' rows of each global batch: together the workers decode each sample of a batch once.
TEST(DataPipeline, EachWorkerDecodesOnlyItsShareOfEachGlobalBatch) {
  const int64_t n = 37, batch = 10;
  auto source = std::make_shared<CountingSource>(n, 4);
  Dataset d = Dataset::from_source(source, {4}, labels(n, 2), {});
  d.batch(batch, false);
  d.shuffle(n, 5);
  d.prefetch(2);
  const int workers = 3;
  for (int w = 0; w < workers; ++w) {
    Model::Impl impl(Strategy::default_strategy(), {4});
    LayerSpec dense;
    dense.kind = LayerKind::Dense;
    dense.units = 2;
    impl.add(dense, {});
    impl.compile(CompileOptions{});
    impl.total_replicas = workers;
    impl.replica_offset = w;
    const std::unique_ptr<core::BatchDecoder> decoder = impl.training_decoder(d, 0, 0);
    ASSERT_NE(decoder, nullptr);
    const std::vector<int64_t> order = d.order(0);
    for (int64_t b = 0; b < d.batches_per_pass(); ++b) {
      const int64_t rows = std::min(batch, n - b * batch);
      const core::Slice mine = core::replica_slice(w, workers, rows);
      const core::DecodedRows& got = decoder->next();
      EXPECT_EQ(got.first, mine.first);
      ASSERT_EQ(got.rows, mine.rows);
      for (int64_t i = 0; i < got.rows; ++i) {  // the rows are those samples, decoded
        std::vector<float> want(4);
        source->read(order[static_cast<size_t>(b * batch + mine.first + i)], want.data());
        EXPECT_EQ(std::vector<float>(got.x.begin() + i * 4, got.x.begin() + (i + 1) * 4), want);
      }
    }
  }
  // Each worker decoded its rows (and those of at most a few batches ahead), the checks' reads aside.
  EXPECT_LE(source->total(), 2 * n + 2 * (2 + 1) * batch);
}

TEST(DataPipeline, AFileCacheIsReusedByTheNextRunOnlyWhenItMatches) {
  test::ScratchDir dir("cache");
  const int64_t n = 30;
  const std::string path = dir.file("samples.cache");
  auto source = std::make_shared<CountingSource>(n, 4);
  {
    Dataset d = Dataset::from_source(source, {4}, labels(n, 2), {});
    d.cache(path);
    Model m = small_mlp({4}, 2);
    ASSERT_EQ(m.fit(d, FitOptions{}, nullptr, nullptr), Status::Ok);
    EXPECT_EQ(source->total(), n);
  }
  SampleCache again(path, source->identity(), n, 4);
  EXPECT_TRUE(again.reused());
  std::vector<float> row(4), want(4);
  ASSERT_TRUE(again.get(17, row.data()));
  source->read(17, want.data());
  EXPECT_EQ(row, want);
  {
    Dataset d = Dataset::from_source(source, {4}, labels(n, 2), {});
    d.cache(path);  // the same source: read from the file, nothing decoded
    Model m = small_mlp({4}, 2);
    ASSERT_EQ(m.fit(d, FitOptions{}, nullptr, nullptr), Status::Ok);
    EXPECT_EQ(source->total(), n + 1);  // the first fit and the one read above
  }
  // Another identity or layout: not reused (made anew).
  EXPECT_FALSE(SampleCache(path, "something else", n, 4).reused());
  EXPECT_FALSE(SampleCache(path, source->identity(), n, 4).reused());  // the line above emptied it
  // A cache cut short (a run that stopped early) is not complete and is made anew.
  auto fresh = std::make_shared<CountingSource>(n, 4);
  {
    Dataset d = Dataset::from_source(fresh, {4}, labels(n, 2), {});
    d.cache(path);
    d.batch(10, false);
    Model m = small_mlp({4}, 2);
    FitOptions fo;
    fo.steps_per_epoch = 1;
    ASSERT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  }
  EXPECT_FALSE(SampleCache(path, fresh->identity(), n, 4).reused());
  EXPECT_EQ(test::status_of([&] { SampleCache(dir.file("no/such/dir/c"), "x", n, 4); }), Status::Io);
}

// A source failing at one sample, as an image whose data is damaged past its header.
class FailingSource final : public SampleSource {
 public:
  void read(int64_t index, float* out) const override {
    if (index == 13) fail(Status::Corrupt, "/data/cats/broken.png: not a decodable PNG (IDAT: CRC error)");
    out[0] = static_cast<float>(index);
  }
  std::string identity() const override { return "failing"; }
};

TEST(DataPipeline, ADecodingFailureStopsFitNamingTheFileAndAnEarlyEndStopsTheThread) {
  for (int32_t prefetch : {0, 1, 4}) {
    Dataset d = Dataset::from_source(std::make_shared<FailingSource>(), {1}, labels(40, 2), {});
    d.batch(4, false);
    d.prefetch(prefetch);
    Model m = small_mlp({1}, 2);
    try {
      m.fit(d, FitOptions{}, nullptr, nullptr);
      ADD_FAILURE() << "fit went past the broken sample";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::Corrupt);
      EXPECT_NE(std::string(e.what()).find("broken.png"), std::string::npos) << e.what();
    }
    // The steps before the failing batch are fine: a fit that stops before it ends cleanly, its
    // prefetch thread (decoding the failing batch meanwhile) stopped and joined.
    FitOptions fo;
    fo.steps_per_epoch = 2;
    fo.epochs = 1;
    EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
  }
}

TEST(DataPipeline, AugmentationIsSeededPerSampleAndPass) {
  const int64_t n = 16, H = 4, W = 5;
  std::vector<float> x(static_cast<size_t>(n * H * W * 2));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const std::vector<float> y = labels(n, 2);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, H, W, 2}, y.data(), DType::F32, {n});
  Dataset flipped = d;
  flipped.random_flip(7);
  EXPECT_TRUE(flipped.decoded());
  int flips = 0, changed_between_passes = 0;
  std::vector<float> a(static_cast<size_t>(H * W * 2)), b(a.size());
  for (int64_t i = 0; i < n; ++i) {
    flipped.read_sample(i, 0, a.data());
    const float* orig = x.data() + i * H * W * 2;
    const bool same = std::equal(a.begin(), a.end(), orig);
    bool mirrored = true;
    for (int64_t r = 0; r < H; ++r)
      for (int64_t c = 0; c < W; ++c)
        for (int64_t k = 0; k < 2; ++k)
          mirrored = mirrored && a[static_cast<size_t>((r * W + c) * 2 + k)] == orig[(r * W + (W - 1 - c)) * 2 + k];
    EXPECT_TRUE(same || mirrored);
    flips += mirrored ? 1 : 0;
    flipped.read_sample(i, 0, b.data());
    EXPECT_EQ(a, b) << "the same pass and sample: the same draw";
    flipped.read_sample(i, 1, b.data());
    changed_between_passes += a != b ? 1 : 0;
  }
  EXPECT_GT(flips, 2);
  EXPECT_LT(flips, 14);
  EXPECT_GT(changed_between_passes, 2);
  Dataset cropped = d;
  cropped.random_crop(2, 3, 9);
  EXPECT_EQ(cropped.x_shape(), Shape({2, 3, 2}));
  std::set<float> corners;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> c(12);
    cropped.read_sample(i, 0, c.data());
    const float first = c[0] - static_cast<float>(i * H * W * 2);  // the crop's top-left in the image
    const int64_t top = static_cast<int64_t>(first) / (W * 2), left = (static_cast<int64_t>(first) % (W * 2)) / 2;
    EXPECT_LE(top, H - 2);
    EXPECT_LE(left, W - 3);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t q = 0; q < 3; ++q)
        EXPECT_EQ(c[static_cast<size_t>((r * 3 + q) * 2)], x[static_cast<size_t>(i * H * W * 2 + ((top + r) * W + left + q) * 2)]);
    corners.insert(first);
  }
  EXPECT_GT(corners.size(), 3u);
  Dataset too_big = d;
  EXPECT_EQ(test::status_of([&] { too_big.random_crop(5, 3, 1); }), Status::InvalidArgument);
}

TEST(DataPipeline, AResumedFitWithPrefetchAndAugmentationSeesTheSameBatches) {
  test::ScratchDir dir("resume");
  const int64_t n = 48;
  std::vector<float> x(static_cast<size_t>(n * 4 * 4));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  const std::vector<float> y = labels(n, 3);
  auto data = [&] {
    Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, 4, 4, 1}, y.data(), DType::F32, {n});
    d.random_flip(3);
    d.random_crop(3, 3, 4);
    d.shuffle(n, 8);
    d.batch(6, false);
    d.prefetch(2);
    return d;
  };
  FitOptions fo;
  fo.epochs = 3;
  Dataset full_data = data();
  Model full = small_mlp({3, 3, 1}, 3);
  Callbacks cb;
  cb.add_model_checkpoint(dir.file("mid-{step}.kx"), 11, 0);  // mid-epoch 2 (8 steps per epoch)
  ASSERT_EQ(full.fit(full_data, fo, &cb, nullptr), Status::Ok);
  Dataset resumed_data = data();
  Model resumed = small_mlp({3, 3, 1}, 3);
  FitOptions ro = fo;
  ro.resume_from = dir.file("mid-11.kx");
  ASSERT_EQ(resumed.fit(resumed_data, ro, nullptr, nullptr), Status::Ok);
  EXPECT_EQ(resumed.get_weights(), full.get_weights());
}

#ifdef KX_TEST_HAVE_IMAGES
TEST(DataPipeline, AnImageFolderTrainsExactlyAsItsPixelsInMemoryWithPrefetchAndCache) {
  test::ScratchDir dir("folder-fit");
  const int64_t per_class = 12, classes = 3, H = 6, W = 6;
  std::vector<uint8_t> pixels;
  std::vector<int32_t> y;
  for (int64_t c = 0; c < classes; ++c) {
    fs::create_directories(dir.path() / ("class" + std::to_string(c)));
    for (int64_t i = 0; i < per_class; ++i) {
      std::vector<uint8_t> px = test::gradient(H, W, 1, static_cast<int>(c));
      for (size_t p = 0; p < px.size(); ++p) px[p] = static_cast<uint8_t>(px[p] + (p * 7 + i * 13) % 31);
      char name[64];
      std::snprintf(name, sizeof name, "class%lld/%03lld.png", static_cast<long long>(c), static_cast<long long>(i));
      test::write_png(dir.file(name), px, H, W, 1);
      pixels.insert(pixels.end(), px.begin(), px.end());
      y.push_back(static_cast<int32_t>(c));
    }
  }
  const int64_t n = per_class * classes;
  auto fit = [&](Dataset d, int32_t prefetch, const char* cache) {
    d.shuffle(n, 21);
    d.batch(5, false);
    d.prefetch(prefetch);
    if (cache) d.cache(cache);
    Model m = small_mlp({H, W, 1}, classes);
    FitOptions fo;
    fo.epochs = 2;
    EXPECT_EQ(m.fit(d, fo, nullptr, nullptr), Status::Ok);
    return m.get_weights();
  };
  const std::vector<float> arrays =
      fit(Dataset::from_arrays(pixels.data(), DType::U8, {n, H, W, 1}, y.data(), DType::I32, {n}), 0, nullptr);
  const std::string folder = (dir.path()).string();
  EXPECT_EQ(fit(Dataset::from_image_directory(folder, H, W, 1), 0, nullptr), arrays);
  EXPECT_EQ(fit(Dataset::from_image_directory(folder, H, W, 1), 3, nullptr), arrays);
  EXPECT_EQ(fit(Dataset::from_image_directory(folder, H, W, 1), 2, ""), arrays);
  const std::string cache = (dir.path() / "cache.bin").string();
  EXPECT_EQ(fit(Dataset::from_image_directory(folder, H, W, 1), 2, cache.c_str()), arrays);
  EXPECT_TRUE(SampleCache(cache, Dataset::from_image_directory(folder, H, W, 1).storage().source->identity(), n, H * W)
                  .reused());
  EXPECT_EQ(fit(Dataset::from_image_directory(folder, H, W, 1), 2, cache.c_str()), arrays);  // from the file
}
#endif

}  // namespace
}  // namespace kx
