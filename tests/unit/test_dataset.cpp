// Datasets: conversion, take/skip, shuffle, batch, feature moments, and IDX files (plain, gzip, broken).
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "kx/dataset.hpp"
#include "kx/error.hpp"
#include "reference.hpp"

namespace kx {
namespace {

Dataset counting_dataset(int64_t n) {
  std::vector<float> x(n * 2), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[2 * i] = static_cast<float>(i);
    x[2 * i + 1] = -static_cast<float>(i);
    y[i] = static_cast<float>(i % 3);
  }
  return Dataset::from_arrays(x.data(), DType::F32, {n, 2}, y.data(), DType::F32, {n});
}

TEST(Dataset, ConvertsU8ImagesToUnitRangeAndIntegerLabels) {
  const uint8_t x[4] = {0, 51, 255, 102};
  const int64_t y[2] = {7, 3};
  Dataset d = Dataset::from_arrays(x, DType::U8, {2, 2}, y, DType::I64, {2});
  EXPECT_EQ(d.num_samples(), 2);
  EXPECT_EQ(d.x_shape(), Shape({2}));
  EXPECT_EQ(d.y_shape(), Shape({}));
  EXPECT_FLOAT_EQ(d.storage().x[1], 0.2f);
  EXPECT_FLOAT_EQ(d.storage().x[2], 1.0f);
  EXPECT_FLOAT_EQ(d.storage().y[0], 7.0f);
}

TEST(Dataset, RejectsBadArrays) {
  const float x[4] = {}, y[3] = {};
  EXPECT_EQ(test::status_of([&] { Dataset::from_arrays(x, DType::F32, {2, 2}, y, DType::F32, {3}); }),
            Status::InvalidArgument);  // 2 samples vs 3 labels
  EXPECT_EQ(test::status_of([&] { Dataset::from_arrays(x, DType::F32, {0, 2}, y, DType::F32, {0}); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { Dataset::from_arrays(x, DType::F32, {}, y, DType::F32, {2}); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { Dataset::from_arrays(x, static_cast<DType>(9), {2, 2}, y, DType::F32, {2}); }),
            Status::InvalidArgument);
  const int64_t big[1] = {int64_t{1} << 40};
  EXPECT_EQ(test::status_of([&] { Dataset::from_arrays(x, DType::F32, {1}, big, DType::I64, {1}); }), Status::InvalidArgument);
}

TEST(Dataset, TakeAndSkipShareStorageAndClip) {
  Dataset d = counting_dataset(10);
  Dataset head = d.take(4), tail = d.skip(4);
  EXPECT_EQ(head.num_samples(), 4);
  EXPECT_EQ(tail.num_samples(), 6);
  EXPECT_EQ(&head.storage(), &d.storage());
  EXPECT_EQ(tail.in_storage_order().front(), 4);
  EXPECT_EQ(d.take(100).num_samples(), 10);
  EXPECT_EQ(d.skip(100).num_samples(), 0);
  EXPECT_EQ(tail.take(2).in_storage_order(), std::vector<int64_t>({4, 5}));
  EXPECT_THROW(d.take(-1), Error);
}

TEST(Dataset, ShuffleIsASeededPermutationThatChangesEachPass) {
  Dataset d = counting_dataset(1000).skip(10);
  d.shuffle(1000, 5);
  const auto p0 = d.order(0), p1 = d.order(1);
  EXPECT_EQ(p0, d.order(0));  // repeatable
  EXPECT_NE(p0, p1);          // reshuffled each pass
  auto sorted = p0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, d.in_storage_order());  // a permutation of exactly the dataset's samples
  Dataset e = counting_dataset(1000).skip(10);
  e.shuffle(1000, 6);
  EXPECT_NE(e.order(0), p0);  // another seed, another order
}

TEST(Dataset, SmallShuffleBufferOnlyMovesSamplesLocally) {
  Dataset d = counting_dataset(500);
  d.shuffle(1, 9);
  EXPECT_EQ(d.order(0), d.in_storage_order());  // a buffer of one is no shuffle, as in tf.data
  d.shuffle(10, 9);
  const auto o = d.order(0);
  for (size_t i = 0; i < o.size(); ++i) EXPECT_LE(o[i], static_cast<int64_t>(i) + 9);  // can't come early
  EXPECT_EQ(std::set<int64_t>(o.begin(), o.end()).size(), o.size());
}

TEST(Dataset, FeatureMomentsArePerChannelOrOverAllValuesOfTheDatasetsOwnSamples) {
  // Samples of shape (2 positions, 3 channels), far from zero so that a one-pass variance would lose digits.
  const int64_t n = 50, P = 2, C = 3;
  std::vector<float> x = test::random_floats(n * P * C, 3, 1000.0f, 1001.0f), y(n, 0.0f);
  Dataset d = Dataset::from_arrays(x.data(), DType::F32, {n, P, C}, y.data(), DType::F32, {n}).skip(10).take(30);
  auto moments = [&](int64_t channels) {  // float64, over samples 10..39
    std::vector<double> mean(channels, 0.0), var(channels, 0.0);
    const int64_t count = 30 * P * C / channels;
    for (int64_t i = 10 * P * C; i < 40 * P * C; ++i) mean[i % channels] += x[i] / static_cast<double>(count);
    for (int64_t i = 10 * P * C; i < 40 * P * C; ++i)
      var[i % channels] += std::pow(x[i] - mean[i % channels], 2) / static_cast<double>(count);
    return std::make_pair(mean, var);
  };
  for (int64_t channels : {C, int64_t{1}}) {
    const FeatureMoments got = d.feature_moments(channels);
    const auto [mean, var] = moments(channels);
    ASSERT_EQ(got.mean.size(), static_cast<size_t>(channels));
    ASSERT_EQ(got.variance.size(), static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      EXPECT_NEAR(got.mean[c], mean[c], 1e-4 * std::fabs(mean[c]));
      EXPECT_NEAR(got.variance[c], var[c], 1e-5 * var[c]) << "channel " << c;
    }
  }
  EXPECT_EQ(test::status_of([&] { d.feature_moments(2); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { d.take(0).feature_moments(1); }), Status::InvalidArgument);
}

TEST(Dataset, BatchesKeepOrDropTheRemainder) {
  Dataset d = counting_dataset(10);
  EXPECT_EQ(d.batch_size(), 32);
  d.batch(4, false);
  EXPECT_EQ(d.batches_per_pass(), 3);
  d.batch(4, true);
  EXPECT_EQ(d.batches_per_pass(), 2);
  EXPECT_THROW(d.batch(0, false), Error);
  EXPECT_THROW(d.shuffle(0, 1), Error);
  EXPECT_THROW(d.prefetch(-1), Error);
}

class IdxFiles : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kx_idx_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                               "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }

  static std::vector<uint8_t> idx(const std::vector<uint32_t>& dims, uint8_t fill, uint8_t rank_byte = 0) {
    std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(rank_byte ? rank_byte : dims.size())};
    size_t n = 1;
    for (uint32_t d : dims) {
      for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
      n *= d;
    }
    for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(fill + i));
    return b;
  }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes, bool gz) {
    const std::string path = (dir / name).string();
    if (gz) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    return path;
  }
};

TEST_F(IdxFiles, ReadsPlainAndGzipFiles) {
  for (bool gz : {false, true}) {
    const auto images = write("img", idx({3, 2, 2}, 0), gz);
    const auto labels = write("lab", idx({3}, 4), gz);
    Dataset d = Dataset::from_idx(images, labels);
    EXPECT_EQ(d.num_samples(), 3);
    EXPECT_EQ(d.x_shape(), Shape({2, 2}));
    EXPECT_FLOAT_EQ(d.storage().x[5], 5.0f / 255.0f);
    EXPECT_FLOAT_EQ(d.storage().y[2], 6.0f);
  }
}

TEST_F(IdxFiles, RejectsMissingTruncatedAndMismatchedFiles) {
  const auto images = write("img", idx({3, 2, 2}, 0), true);
  const auto labels = write("lab", idx({3}, 0), true);
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx((dir / "nope").string(), labels); }), Status::Io);
  auto truncated = idx({3, 2, 2}, 0);
  truncated.resize(truncated.size() - 3);
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx(write("t", truncated, true), labels); }), Status::Corrupt);
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx(write("t2", {0, 0, 8}, false), labels); }), Status::Corrupt);
  auto bad_magic = idx({3, 2, 2}, 0);
  bad_magic[2] = 0x0D;  // floats, not bytes
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx(write("m", bad_magic, false), labels); }), Status::Corrupt);
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx(labels, images); }), Status::Corrupt);  // swapped: wrong ranks
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx(images, write("l4", idx({4}, 0), true)); }), Status::Corrupt);
  EXPECT_EQ(test::status_of([&] { Dataset::from_idx(write("z", {}, false), labels); }), Status::Corrupt);
}

}  // namespace
}  // namespace kx
