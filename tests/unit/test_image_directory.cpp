// Image-folder datasets: labels in sorted folder order, PNG pixels exact and JPEG close after a round
// trip through the same libraries, channel conversion, tf.image.resize's bilinear, and files that do
// not decode skipped and counted, or (failing past their header) an error naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/image_codec.hpp"
#include "data_files.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"
#include "reference.hpp"

#ifdef KX_TEST_HAVE_IMAGES
#include "image_writer.hpp"
#endif

namespace kx {
namespace {

namespace fs = std::filesystem;

#ifdef KX_TEST_HAVE_IMAGES

std::vector<float> sample(const Dataset& d, int64_t i) {
  std::vector<float> out(static_cast<size_t>(num_elements(d.x_shape())));
  d.read_sample(i, 0, out.data());
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class ImageFolder : public ::testing::Test {
 protected:
  test::ScratchDir dir{"images"};
  void folder(const std::string& name) { fs::create_directories(dir.path() / name); }
};

TEST_F(ImageFolder, RoundTripsLabelsAndPixels) {
  // Classes listed out of order; sorted, "cats" < "dogs" < "zebras" are labels 0, 1, 2.
  for (const char* c : {"zebras", "cats", "dogs"}) folder(c);
  folder("dogs/nested");
  const int H = 6, W = 5;
  const auto rgb0 = test::gradient(H, W, 3, 0), rgb1 = test::gradient(H, W, 3, 1), rgb2 = test::gradient(H, W, 3, 2);
  test::write_png(dir.file("zebras/b.png"), rgb0, H, W, 3);
  test::write_png(dir.file("cats/x.PNG"), rgb1, H, W, 3);
  test::write_jpeg(dir.file("dogs/nested/a.jpg"), rgb2, H, W, 3, 100);
  test::write_png(dir.file("dogs/a.png"), rgb0, H, W, 3);
  test::write_text(dir.file("dogs/notes.txt"), "not an image, ignored");
  test::write_text(dir.file("top.png"), "outside every class folder, ignored");
  Dataset d = Dataset::from_image_directory(dir.path(), H, W, 3);
  EXPECT_TRUE(d.decoded());
  EXPECT_EQ(d.num_samples(), 4);
  EXPECT_EQ(d.storage().skipped, 0);
  EXPECT_EQ(d.x_shape(), Shape({H, W, 3}));
  EXPECT_EQ(d.storage().class_names, std::vector<std::string>({"cats", "dogs", "zebras"}));
  // Class by class, each class's files sorted by path: cats/x.PNG, dogs/a.png, dogs/nested/a.jpg, zebras/b.png.
  EXPECT_EQ(d.storage().y, std::vector<float>({0, 1, 1, 2}));
  auto exact = [](const std::vector<uint8_t>& px) {
    std::vector<float> v;
    for (uint8_t p : px) v.push_back(static_cast<float>(p) * (1.0f / 255.0f));
    return v;
  };
  EXPECT_EQ(sample(d, 0), exact(rgb1));
  EXPECT_EQ(sample(d, 1), exact(rgb0));
  EXPECT_EQ(sample(d, 3), exact(rgb0));
  const std::vector<float> jpeg = sample(d, 2), want = exact(rgb2);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(double{jpeg[i]} - want[i]));
  EXPECT_LT(worst, 8.0 / 255) << "quality-100 JPEG of a smooth picture";
  EXPECT_GT(worst, 0.0) << "a JPEG is lossy: an exact match would mean the JPEG was not the file read";
}

TEST_F(ImageFolder, ConvertsChannelsAsTheDecodersDo) {
  folder("a");
  const auto gray = test::gradient(4, 4, 1, 3), rgb = test::gradient(4, 4, 3, 5);
  test::write_png(dir.file("a/0gray.png"), gray, 4, 4, 1);
  test::write_png(dir.file("a/1rgb.png"), rgb, 4, 4, 3);
  test::write_jpeg(dir.file("a/2gray.jpg"), gray, 4, 4, 1, 100);
  Dataset as_rgb = Dataset::from_image_directory(dir.path(), 4, 4, 3);
  for (int64_t i : {0, 2}) {  // grayscale to RGB: three equal channels, equal to the gray value
    const std::vector<float> v = sample(as_rgb, i);
    for (size_t p = 0; p < 16; ++p) {
      EXPECT_EQ(v[3 * p], v[3 * p + 1]);
      EXPECT_EQ(v[3 * p], v[3 * p + 2]);
      if (i == 0) {
        EXPECT_EQ(v[3 * p], static_cast<float>(gray[p]) * (1.0f / 255.0f));
      }
    }
  }
  Dataset as_gray = Dataset::from_image_directory(dir.path(), 4, 4, 1);
  const std::vector<float> g = sample(as_gray, 1);
  for (size_t p = 0; p < 16; ++p) {  // a weighted mean of R, G and B lies between them
    const auto [lo, hi] = std::minmax({rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2]});
    EXPECT_GE(g[p] * 255.0f, lo - 1.0f);
    EXPECT_LE(g[p] * 255.0f, hi + 1.0f);
  }
  Dataset as_rgba = Dataset::from_image_directory(dir.path(), 4, 4, 4);
  EXPECT_EQ(sample(as_rgba, 1)[3], 1.0f);  // opaque
}

TEST_F(ImageFolder, ResizesBilinearlyWithHalfPixelCentersAsTfImageResize) {
  folder("a");
  test::write_png(dir.file("a/row.png"), {0, 100}, 1, 2, 1);
  // tf.image.resize([[0, 100]], [1, 4], "bilinear") = [0, 25, 75, 100]; down to 1: the mean.
  std::vector<float> want = {0, 25, 75, 100};
  for (float& v : want) v *= 1.0f / 255.0f;
  EXPECT_EQ(sample(Dataset::from_image_directory(dir.path(), 1, 4, 1), 0), want);
  EXPECT_FLOAT_EQ(sample(Dataset::from_image_directory(dir.path(), 1, 1, 1), 0)[0], 50.0f / 255.0f);
  // A 2-D case against the formula in double: 5x7 down to 3x4 and up to 8x9.
  const auto px = test::gradient(5, 7, 2 + 1, 9);
  test::write_png(dir.file("a/row.png"), px, 5, 7, 3);
  for (auto [oh, ow] : {std::pair{3, 4}, std::pair{8, 9}}) {
    const std::vector<float> got = sample(Dataset::from_image_directory(dir.path(), oh, ow, 3), 0);
    auto src = [](int64_t o, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
      const double s = (o + 0.5) * in / out - 0.5;
      lo = std::clamp<int64_t>(static_cast<int64_t>(std::floor(s)), 0, in - 1);
      hi = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(s)), 0, in - 1);
      return s - std::floor(s);
    };
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t c = 0; c < 3; ++c) {
          int64_t y0, y1, x0, x1;
          const double fy = src(y, 5, oh, y0, y1), fx = src(x, 7, ow, x0, x1);
          auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(px[static_cast<size_t>((yy * 7 + xx) * 3 + c)]); };
          const double top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * fx;
          const double bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * fx;
          EXPECT_NEAR(got[static_cast<size_t>((y * ow + x) * 3 + c)], (top + (bottom - top) * fy) / 255.0, 1e-5);
        }
  }
}

TEST_F(ImageFolder, SkipsAndCountsFilesThatDoNotDecode) {
  folder("a");
  folder("b");
  const auto px = test::gradient(8, 8, 3, 1);
  test::write_png(dir.file("a/good.png"), px, 8, 8, 3);
  test::write_jpeg(dir.file("b/good.jpg"), px, 8, 8, 3, 90);
  test::write_text(dir.file("a/garbage.png"), "this is not a PNG at all");
  test::write_text(dir.file("a/empty.jpg"), "");
  std::string png;
  {
    std::ifstream in(dir.file("a/good.png"), std::ios::binary);
    png.assign(std::istreambuf_iterator<char>(in), {});
  }
  test::write_text(dir.file("b/cut.png"), png.substr(0, 20));  // signature, then the header cut
  std::string jpg;
  {
    std::ifstream in(dir.file("b/good.jpg"), std::ios::binary);
    jpg.assign(std::istreambuf_iterator<char>(in), {});
  }
  test::write_text(dir.file("b/cut.jpg"), jpg.substr(0, 10));
  ::testing::internal::CaptureStderr();
  Dataset d = Dataset::from_image_directory(dir.path(), 8, 8, 3);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.num_samples(), 2);
  EXPECT_EQ(d.storage().skipped, 4);
  EXPECT_EQ(d.storage().y, std::vector<float>({0, 1}));
  for (const char* f : {"garbage.png", "empty.jpg", "cut.png", "cut.jpg"})
    EXPECT_NE(warnings.find(f), std::string::npos) << warnings;
  // A file whose header decodes but whose data is damaged: the read fails, naming it.
  std::string damaged = png;
  const size_t idat = png.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  for (size_t i = idat + 6; i < idat + 10; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);  // its data
  test::write_text(dir.file("a/good.png"), damaged);
  Dataset again = Dataset::from_image_directory(dir.path(), 8, 8, 3);
  EXPECT_EQ(again.num_samples(), 2);
  EXPECT_EQ(test::status_of([&] { sample(again, 0); }), Status::Corrupt);
  EXPECT_NE(error_of([&] { sample(again, 0); }).find("good.png"), std::string::npos);
  // A truncated JPEG (past its header) is an error too, as for tf.io.decode_jpeg.
  test::write_text(dir.file("b/good.jpg"), jpg.substr(0, jpg.size() - 6));  // inside the scan data
  const std::string truncated = error_of([&] { sample(again, 1); });
  EXPECT_NE(truncated.find("good.jpg"), std::string::npos) << truncated;
  EXPECT_NE(truncated.find("truncated"), std::string::npos) << truncated;
}

TEST_F(ImageFolder, RejectsBadArguments) {
  EXPECT_EQ(test::status_of([&] { Dataset::from_image_directory(dir.file("nope"), 4, 4, 3); }), Status::Io);
  EXPECT_EQ(test::status_of([&] { Dataset::from_image_directory(dir.path(), 4, 4, 3); }), Status::InvalidArgument);
  folder("empty_class");
  EXPECT_NE(error_of([&] { Dataset::from_image_directory(dir.path(), 4, 4, 3); }).find("no decodable"),
            std::string::npos);
  EXPECT_EQ(test::status_of([&] { Dataset::from_image_directory(dir.path(), 0, 4, 3); }), Status::InvalidArgument);
  EXPECT_EQ(test::status_of([&] { Dataset::from_image_directory(dir.path(), 4, 4, 2); }), Status::InvalidArgument);
}

#else

TEST(ImageFolder, IsUnsupportedWithoutDecoders) {
  test::ScratchDir dir("images");
  EXPECT_FALSE(data::images_supported());
  EXPECT_EQ(test::status_of([&] { Dataset::from_image_directory(dir.path(), 4, 4, 3); }), Status::Unsupported);
}

#endif

}  // namespace
}  // namespace kx
