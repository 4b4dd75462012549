// Keras's image_dataset_from_directory: the class folders and their image files are listed (and each
// file's header checked) when the dataset is made; the pixels are decoded when a batch needs them.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/image_codec.hpp"
#include "data/image_resize.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

namespace fs = std::filesystem;

bool has_image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::string read_whole_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(Status::Io, path + ": cannot open (" + std::strerror(errno) + ")");
  std::string bytes;
  char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) bytes.append(chunk, got);
  if (std::ferror(f.get())) fail(Status::Io, path + ": cannot read (" + std::strerror(errno) + ")");
  return bytes;
}

// FNV-1a: a fingerprint of the file list for the cache's identity (not a security property).
uint64_t fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

class ImageFolder final : public SampleSource {
 public:
  ImageFolder(std::vector<std::string> files, int64_t height, int64_t width, int64_t channels, std::string identity)
      : files_(std::move(files)), height_(height), width_(width), channels_(channels), identity_(std::move(identity)) {}

  void read(int64_t index, float* out) const override {
    const std::string& path = files_[static_cast<size_t>(index)];
    const data::Image img = data::decode_image(read_whole_file(path), static_cast<int>(channels_), path);
    data::resize_bilinear(img, height_, width_, 1.0f / 255.0f, out);
  }
  std::string identity() const override { return identity_; }

 private:
  std::vector<std::string> files_;
  int64_t height_, width_, channels_;
  std::string identity_;
};

}  // namespace

Dataset Dataset::from_image_directory(const std::string& dir, int64_t height, int64_t width, int64_t channels) {
  // height <= max / width: the product itself could overflow.
  require(height > 0 && width > 0 && height <= data::kMaxImagePixels / width, Status::InvalidArgument,
          "image size must be positive (and at most 2^27 pixels), got " + std::to_string(height) + "x" +
              std::to_string(width));
  require(channels == 1 || channels == 3 || channels == 4, Status::InvalidArgument,
          "channels must be 1 (grayscale), 3 (RGB) or 4 (RGBA), got " + std::to_string(channels));
  if (!data::images_supported())
    fail(Status::Unsupported, "this build of kx has no image decoders (built without libjpeg and libpng)");
  std::error_code ec;
  require(fs::is_directory(dir, ec), Status::Io, dir + ": not a directory");
  std::vector<std::string> classes;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  if (ec) fail(Status::Io, dir + ": cannot list (" + ec.message() + ")");
  std::sort(classes.begin(), classes.end());  // Python's sorted(): by code point, as UTF-8 bytes
  require(!classes.empty(), Status::InvalidArgument, dir + ": no class subfolders (one folder per class)");

  auto s = std::make_shared<DatasetStorage>();
  std::vector<std::string> files;
  std::string listing = fs::absolute(dir).lexically_normal().string() + "\n";
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<fs::path> found;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(fs::path(dir) / classes[label], ec))
      if (e.is_regular_file() && has_image_extension(e.path())) found.push_back(e.path());
    if (ec) fail(Status::Io, (fs::path(dir) / classes[label]).string() + ": cannot list (" + ec.message() + ")");
    std::sort(found.begin(), found.end());
    for (const fs::path& p : found) {
      std::string why;
      if (!data::probe_image(p.string(), why)) {
        std::fprintf(stderr, "kx: warning: skipping %s: %s\n", p.c_str(), why.c_str());
        ++s->skipped;
        continue;
      }
      files.push_back(p.string());
      s->y.push_back(static_cast<float>(label));
      std::error_code stat_ec;
      const auto size = fs::file_size(p, stat_ec);
      const auto time = fs::last_write_time(p, stat_ec).time_since_epoch().count();
      listing += fs::relative(p, dir, stat_ec).string() + " " + std::to_string(label) + " " + std::to_string(size) +
                 " " + std::to_string(time) + "\n";
    }
  }
  require(!files.empty(), Status::InvalidArgument,
          dir + ": no decodable .jpg, .jpeg or .png files in its class folders (" + std::to_string(s->skipped) +
              " skipped)");
  s->class_names = std::move(classes);
  s->samples = static_cast<int64_t>(files.size());
  s->x_shape = {height, width, channels};
  char identity[160];
  std::snprintf(identity, sizeof identity, "image folder, %lld files, %lldx%lldx%lld, listing %016llx",
                static_cast<long long>(files.size()), static_cast<long long>(height), static_cast<long long>(width),
                static_cast<long long>(channels), static_cast<unsigned long long>(fingerprint(listing)));
  s->source = std::make_shared<ImageFolder>(std::move(files), height, width, channels, identity);
  return Dataset(std::move(s));
}

}  // namespace kx
