// IDX files (the MNIST format), read through zlib so that .gz files and plain files both work. A header
// is only a claim: the data it announces is refused when the file cannot hold it (a plain file shorter
// than the data, a gzip file too small to inflate to it), and read in chunks that grow with what has
// arrived, so that no header makes kx allocate more than about twice the bytes the file really holds.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/checked_size.hpp"
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

// Deflate's largest expansion: a 258-byte match costs at least two bits (1032:1), so a gzip file of
// n bytes inflates to fewer than kMaxInflation * n bytes, however its members are arranged.
constexpr int64_t kMaxInflation = 1032;
// The first chunk of data read; each later one at most doubles what was read.
constexpr size_t kFirstChunk = size_t{1} << 20;

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

// Refuses a header whose data the file cannot hold, before anything that size is allocated: a plain
// file must hold it after the header, a gzip file must be large enough to inflate to it.
void check_claim(gzFile f, const std::string& path, int64_t header_bytes, int64_t total, const Shape& dims) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return;  // not a regular file (a pipe): the chunked read below still bounds the memory
  const int64_t file_bytes = static_cast<int64_t>(std::min<uintmax_t>(size, uintmax_t{1} << 50));
  const std::string claim = path + ": the header claims " + std::to_string(total) + " bytes of data (dimensions " +
                            to_string(dims) + ")";
  if (gzdirect(f)) {
    require(total <= file_bytes - header_bytes, Status::Corrupt,
            claim + ", the file holds " + std::to_string(std::max<int64_t>(file_bytes - header_bytes, 0)));
  } else {
    require(total / kMaxInflation < file_bytes, Status::Corrupt,
            claim + ", more than a gzip file of " + std::to_string(file_bytes) + " bytes can hold");
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
  for (size_t i = 0; i < rank; ++i) {
    unsigned char b[4];
    read_exact(f.get(), b, 4, path, "header");
    const int64_t d = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    if (d <= 0) fail(Status::Corrupt, path + ": dimension " + std::to_string(i) + " is zero");
    out.dims.push_back(d);
  }
  const int64_t total = core::checked_elements(out.dims, path + ": the IDX dimensions");
  check_claim(f.get(), path, static_cast<int64_t>(4 + 4 * rank), total, out.dims);
  // In chunks: a gzip file's real length is known only once it is inflated.
  const size_t want = static_cast<size_t>(total);
  const std::string what = "data (the header claims " + std::to_string(total) + " bytes)";
  out.data.reserve(std::min(want, kFirstChunk));
  while (out.data.size() < want) {
    const size_t have = out.data.size();
    out.data.resize(have + std::min(want - have, std::max(have, kFirstChunk)));
    read_exact(f.get(), out.data.data() + have, out.data.size() - have, path, what.c_str());
  }
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
