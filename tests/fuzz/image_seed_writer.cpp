// Writes small PNG and JPEG files (gray, RGB, RGBA; baseline and progressive) with libpng and
// libjpeg-turbo, each behind the one byte fuzz_image_reader reads first: its seed corpus.
//
//   fuzz_image_seed_writer DIR
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "image_writer.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int n = 0;
  auto prefix = [&](const std::string& path, char channels_byte) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    std::ofstream(path, std::ios::binary) << channels_byte << bytes.str();
  };
  for (int channels : {1, 3, 4}) {
    const auto px = kx::test::gradient(9, 7, channels, channels);
    const std::string png = dir + "/seed-" + std::to_string(n++) + ".png";
    kx::test::write_png(png, px, 9, 7, channels);
    prefix(png, static_cast<char>(channels));
    if (channels == 4) continue;
    const std::string jpg = dir + "/seed-" + std::to_string(n++) + ".jpg";
    kx::test::write_jpeg(jpg, px, 9, 7, channels, 75);
    prefix(jpg, static_cast<char>(channels + 1));
  }
  return 0;
}
