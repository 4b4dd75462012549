// libFuzzer target for the image decoders (libjpeg-turbo and libpng behind kx's error handling) and the
// resize: any bytes give pixels or a kx::Error, never a crash, a hang or a longjmp out of place.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/image_codec.hpp"
#include "data/image_resize.hpp"
#include "kx/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte picks the channels asked for; the rest is the file.
  const int channels = data[0] % 3 == 0 ? 1 : data[0] % 3 == 1 ? 3 : 4;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const kx::data::Image img = kx::data::decode_image(bytes, channels, "fuzz-input");
    if (img.pixels.size() != static_cast<size_t>(img.height * img.width * img.channels)) __builtin_trap();
    std::vector<float> out(static_cast<size_t>(5 * 7 * img.channels));
    kx::data::resize_bilinear(img, 5, 7, 1.0f / 255.0f, out.data());
  } catch (const kx::Error&) {
  }
  return 0;
}
