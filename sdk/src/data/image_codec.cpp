#include "data/image_codec.hpp"

#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "kx/error.hpp"

#ifdef KX_HAVE_IMAGES
// clang-format off
#include <jpeglib.h>  // after <cstdio>: jpeglib.h uses FILE
#include <jerror.h>
// clang-format on
#include <png.h>
#endif

namespace kx::data {
namespace {

#ifdef KX_HAVE_IMAGES

bool is_png(std::string_view b) { return b.size() >= 8 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8); }
bool is_jpeg(std::string_view b) { return b.size() >= 3 && b.substr(0, 3) == "\xFF\xD8\xFF"; }

void check_channels(int channels) {
  require(channels == 1 || channels == 3 || channels == 4, Status::InvalidArgument,
          "images have 1 (grayscale), 3 (RGB) or 4 (RGBA) channels, not " + std::to_string(channels));
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// libjpeg reports errors through error_exit, which must not return: it jumps back to the setjmp of
// the function that called into the library (only C frames and trivially destructible objects lie
// between, so the jump skips no destructor). Warnings are silent, except a truncated file, which is an
// error here as it is for tf.io.decode_jpeg.
struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

[[noreturn]] void jpeg_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_message(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<JpegErrors*>(c->err)->truncated = true;
}

void init_errors(jpeg_decompress_struct& cinfo, JpegErrors& err) {
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_message;
  err.message[0] = '\0';
  err.truncated = false;
}

J_COLOR_SPACE jpeg_space(int channels) { return channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_RGB : JCS_EXT_RGBA; }

// `out` is the caller's: no automatic object of this function changes between setjmp and a jump.
void decode_jpeg(std::string_view bytes, int channels, const std::string& name, Image& out) {
  jpeg_decompress_struct cinfo{};
  JpegErrors err;
  init_errors(cinfo, err);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    fail(Status::Corrupt, name + ": not a decodable JPEG (" + err.message + ")");
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = jpeg_space(channels);
  cinfo.dct_method = JDCT_ISLOW;
  const int64_t pixels = int64_t{cinfo.image_width} * cinfo.image_height;
  if (pixels > kMaxImagePixels) {
    jpeg_destroy_decompress(&cinfo);
    fail(Status::Corrupt, name + ": a JPEG of " + std::to_string(cinfo.image_width) + "x" +
                              std::to_string(cinfo.image_height) + " pixels is beyond the largest decoded");
  }
  jpeg_start_decompress(&cinfo);
  out.height = cinfo.output_height;
  out.width = cinfo.output_width;
  out.channels = cinfo.output_components;
  const size_t row = static_cast<size_t>(out.width * out.channels);
  try {
    out.pixels.resize(row * static_cast<size_t>(out.height));
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW line = out.pixels.data() + row * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &line, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err.truncated) fail(Status::Corrupt, name + ": the JPEG data is truncated");
}

Image decode_png(std::string_view bytes, int channels, const std::string& name) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  // The simplified API keeps libpng's longjmp inside libpng; failures come back as 0 and a message.
  auto failed = [&]() {
    const std::string why = img.message;
    png_image_free(&img);
    fail(Status::Corrupt, name + ": not a decodable PNG (" + why + ")");
  };
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) failed();
  if (int64_t{img.width} * img.height > kMaxImagePixels) {
    png_image_free(&img);
    fail(Status::Corrupt, name + ": a PNG of " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                              " pixels is beyond the largest decoded");
  }
  // Read with alpha, then drop it (as tf.io.decode_png does), rather than composite onto a background.
  const int with_alpha = channels == 1 ? 2 : 4;
  img.format = channels == 1 ? PNG_FORMAT_GA : PNG_FORMAT_RGBA;
  std::vector<uint8_t> buffer(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, buffer.data(), 0, nullptr)) failed();
  Image out;
  out.height = img.height;
  out.width = img.width;
  out.channels = channels;
  const size_t n = static_cast<size_t>(out.height * out.width);
  out.pixels.resize(n * static_cast<size_t>(channels));
  for (size_t p = 0; p < n; ++p)
    std::memcpy(&out.pixels[p * static_cast<size_t>(channels)], &buffer[p * with_alpha], static_cast<size_t>(channels));
  png_image_free(&img);
  return out;
}

// No C++ object lives in the frame that calls setjmp: the message is built by the caller, so nothing
// is left half-made (or clobbered, as GCC warns) when libjpeg's error handler jumps back.
bool jpeg_header_reads(std::FILE* f, jpeg_decompress_struct& cinfo, JpegErrors& err) {
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_read_header(&cinfo, TRUE);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

bool probe_jpeg(std::FILE* f, std::string& why) {
  jpeg_decompress_struct cinfo{};
  JpegErrors err;
  init_errors(cinfo, err);
  if (jpeg_header_reads(f, cinfo, err)) return true;
  why = std::string("not a decodable JPEG (") + err.message + ")";
  return false;
}

bool probe_png(std::FILE* f, std::string& why) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  const bool ok = png_image_begin_read_from_stdio(&img, f) != 0;
  if (!ok) why = std::string("not a decodable PNG (") + img.message + ")";
  png_image_free(&img);
  return ok;
}

#endif  // KX_HAVE_IMAGES

}  // namespace

#ifdef KX_HAVE_IMAGES

bool images_supported() { return true; }

Image decode_image(std::string_view bytes, int channels, const std::string& name) {
  check_channels(channels);
  if (is_png(bytes)) return decode_png(bytes, channels, name);
  if (is_jpeg(bytes)) {
    Image out;
    decode_jpeg(bytes, channels, name, out);
    return out;
  }
  fail(Status::Corrupt, name + ": neither a JPEG nor a PNG (unknown signature)");
}

bool probe_image(const std::string& path, std::string& why) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    why = std::string("cannot open (") + std::strerror(errno) + ")";
    return false;
  }
  char magic[8] = {};
  const size_t got = std::fread(magic, 1, sizeof magic, f.get());
  std::rewind(f.get());
  const std::string_view head(magic, got);
  if (is_png(head)) return probe_png(f.get(), why);
  if (is_jpeg(head)) return probe_jpeg(f.get(), why);
  why = got == 0 ? "empty file" : "neither a JPEG nor a PNG (unknown signature)";
  return false;
}

#else

bool images_supported() { return false; }

Image decode_image(std::string_view, int, const std::string&) {
  fail(Status::Unsupported, "this build of kx has no image decoders (built without libjpeg and libpng)");
}

bool probe_image(const std::string&, std::string&) {
  fail(Status::Unsupported, "this build of kx has no image decoders (built without libjpeg and libpng)");
}

#endif

}  // namespace kx::data
