// Writes PNG and JPEG files for the image-folder tests with the libraries kx decodes them with
// (libpng's simplified API, libjpeg-turbo).
#pragma once
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>  // after <cstdio>
// clang-format on
#include <png.h>

namespace kx::test {

// pixels: height * width * channels bytes (1 gray, 3 RGB, 4 RGBA).
inline void write_png(const std::string& path, const std::vector<uint8_t>& pixels, int height, int width, int channels) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(width);
  img.height = static_cast<png_uint_32>(height);
  img.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  if (!png_image_write_to_file(&img, path.c_str(), 0, pixels.data(), 0, nullptr))
    throw std::runtime_error(path + ": " + img.message);
}

// Errors from libjpeg while writing a test file end the test program (the inputs are the test's own).
inline void write_jpeg(const std::string& path, const std::vector<uint8_t>& pixels, int height, int width, int channels,
                       int quality) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot create");
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + static_cast<size_t>(c.next_scanline) * width * channels;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// A smooth test picture (JPEG keeps it close): gradients with a per-image offset, all below 256.
inline std::vector<uint8_t> gradient(int height, int width, int channels, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(height * width * channels));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        p[static_cast<size_t>((y * width + x) * channels + c)] =
            static_cast<uint8_t>((seed % 4) * 20 + y * 100 / height + x * 50 / width + c * 25);
  return p;
}

}  // namespace kx::test
