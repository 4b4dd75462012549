// JPEG and PNG decoding through Debian's libjpeg-turbo and libpng (KX_WITH_IMAGES), into 8-bit pixels
// with the channel count asked for; the libraries convert between grayscale and color as
// tf.io.decode_image does (libjpeg's output color space, libpng's own RGB to gray), alpha is dropped.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kx::data {

struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels, row-major, channels last
};

// Whether this build decodes images (libjpeg and libpng were found).
bool images_supported();

// The largest image decoded (pixels): larger ones are refused before their memory is taken.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 27;

// Decodes a whole JPEG or PNG file's bytes into `channels` (1, 3 or 4) channels. Corrupt naming
// `name` and the library's reason when the bytes do not decode (a truncated JPEG included);
// Unsupported when this build has no decoders.
Image decode_image(std::string_view bytes, int channels, const std::string& name);

// Reads only the header of the file at path: true when it is a JPEG or PNG whose header decodes,
// else false with `why` set (the file's problem, for the warning that skips it).
bool probe_image(const std::string& path, std::string& why);

}  // namespace kx::data
