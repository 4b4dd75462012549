// IDX files (the MNIST format), read through zlib so that .gz files and plain files both work.
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "kx/dataset.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

void read_exact(gzFile f, void* dst, size_t n, const std::string& path, const char* what) {
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, static_cast<char*>(dst) + done, chunk);
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      fail(Status::Corrupt, path + ": cannot decompress " + what + " (" + (msg ? msg : "zlib error") + ")");
    }
    if (got == 0) fail(Status::Corrupt, path + ": truncated " + what);
    done += static_cast<size_t>(got);
  }
}

// Reads an IDX file of unsigned bytes with `rank` dimensions.
IdxFile read_idx_u8(const std::string& path, size_t rank) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) fail(Status::Io, path + ": cannot open (" + std::strerror(errno) + ")");
  unsigned char magic[4];
  read_exact(f.get(), magic, 4, path, "header");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08)
    fail(Status::Corrupt, path + ": not an IDX file of unsigned bytes (bad magic number)");
  if (magic[3] != rank)
    fail(Status::Corrupt, path + ": expected " + std::to_string(rank) + " dimensions, the file has " +
                              std::to_string(magic[3]));
  IdxFile out;
  int64_t total = 1;
  for (size_t i = 0; i < rank; ++i) {
    unsigned char b[4];
    read_exact(f.get(), b, 4, path, "header");
    const int64_t d = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    if (d <= 0) fail(Status::Corrupt, path + ": dimension " + std::to_string(i) + " is zero");
    if (total > (int64_t{1} << 36) / d) fail(Status::Corrupt, path + ": dimensions too large");
    total *= d;
    out.dims.push_back(d);
  }
  out.data.resize(static_cast<size_t>(total));
  read_exact(f.get(), out.data.data(), out.data.size(), path, "data");
  return out;
}

}  // namespace

Dataset Dataset::from_idx(const std::string& images_path, const std::string& labels_path) {
  const IdxFile images = read_idx_u8(images_path, 3);
  const IdxFile labels = read_idx_u8(labels_path, 1);
  if (images.dims[0] != labels.dims[0])
    fail(Status::Corrupt, images_path + " has " + std::to_string(images.dims[0]) + " images but " + labels_path +
                              " has " + std::to_string(labels.dims[0]) + " labels");
  return from_arrays(images.data.data(), DType::U8, images.dims, labels.data.data(), DType::U8, labels.dims);
}

}  // namespace kx
