// Keras's RandomFlip("horizontal") and RandomCrop as dataset maps over images (height, width,
// channels): each sample's draw depends only on (seed, pass, storage index), so a resumed fit, a
// prefetching one and one that decodes on demand all see the same samples.
#include <memory>

#include "backend/seed_mix.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

// The draw for a sample: uniform 64 bits.
uint64_t draw(uint64_t seed, uint64_t pass, int64_t index) {
  return backend::mix_seed(backend::mix_seed(seed, pass), static_cast<uint64_t>(index));
}

void require_image(const Shape& s, const char* what) {
  require(s.size() == 3, Status::InvalidArgument,
          std::string(what) + " needs images (height, width, channels), samples have shape " + to_string(s));
}

class RandomFlip final : public SampleMap {
 public:
  explicit RandomFlip(uint64_t seed) : seed_(seed) {}
  Shape output_shape(const Shape& in) const override {
    require_image(in, "random_flip");
    return in;
  }
  void apply(const float* in, const Shape& s, float* out, uint64_t pass, int64_t index) const override {
    const int64_t h = s[0], w = s[1], c = s[2];
    const bool flip = (draw(seed_, pass, index) >> 63) != 0;  // probability 1/2, as Keras
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const float* src = in + (y * w + (flip ? w - 1 - x : x)) * c;
        std::copy(src, src + c, out + (y * w + x) * c);
      }
  }

 private:
  uint64_t seed_;
};

class RandomCrop final : public SampleMap {
 public:
  RandomCrop(int64_t height, int64_t width, uint64_t seed) : height_(height), width_(width), seed_(seed) {}
  Shape output_shape(const Shape& in) const override {
    require_image(in, "random_crop");
    require(height_ <= in[0] && width_ <= in[1], Status::InvalidArgument,
            "random_crop of " + std::to_string(height_) + "x" + std::to_string(width_) + " is larger than the images " +
                to_string(in));
    return {height_, width_, in[2]};
  }
  void apply(const float* in, const Shape& s, float* out, uint64_t pass, int64_t index) const override {
    const int64_t w = s[1], c = s[2];
    const uint64_t r = draw(seed_, pass, index);
    // Offsets uniform over the valid ones: two 32-bit halves, each scaled (no modulo bias to speak of).
    const int64_t top = static_cast<int64_t>(((r >> 32) * static_cast<uint64_t>(s[0] - height_ + 1)) >> 32);
    const int64_t left = static_cast<int64_t>(((r & 0xffffffffu) * static_cast<uint64_t>(w - width_ + 1)) >> 32);
    for (int64_t y = 0; y < height_; ++y) {
      const float* src = in + ((top + y) * w + left) * c;
      std::copy(src, src + width_ * c, out + y * width_ * c);
    }
  }

 private:
  int64_t height_, width_;
  uint64_t seed_;
};

}  // namespace

void Dataset::random_flip(uint64_t seed) { map(std::make_shared<RandomFlip>(seed)); }

void Dataset::random_crop(int64_t height, int64_t width, uint64_t seed) {
  require(height > 0 && width > 0, Status::InvalidArgument,
          "random_crop needs a positive size, got " + std::to_string(height) + "x" + std::to_string(width));
  map(std::make_shared<RandomCrop>(height, width, seed));
}

}  // namespace kx
