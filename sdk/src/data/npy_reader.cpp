// Datasets from numpy .npy files: x and y each an array with the samples first.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "data/npy_format.hpp"
#include "kx/dataset.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

struct NpyArray {
  data::NpyHeader header;
  std::vector<uint64_t> data;  // 8-byte aligned for every dtype
};

NpyArray read_npy(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(Status::Io, path + ": cannot open (" + std::strerror(errno) + ")");
  if (std::fseek(f.get(), 0, SEEK_END) != 0) fail(Status::Io, path + ": cannot seek (" + std::strerror(errno) + ")");
  const long end = std::ftell(f.get());
  if (end < 0) fail(Status::Io, path + ": cannot tell its size (" + std::strerror(errno) + ")");
  std::rewind(f.get());
  const size_t size = static_cast<size_t>(end);
  // The header is at most 4 GiB by the format, in practice a few hundred bytes: read what the prefix
  // announces, then the data into aligned memory.
  std::string head(std::min<size_t>(size, 12), '\0');
  if (std::fread(head.data(), 1, head.size(), f.get()) != head.size()) fail(Status::Io, path + ": cannot read");
  size_t header_end = head.size();
  if (head.size() >= 10 && static_cast<unsigned char>(head[6]) >= 1 && static_cast<unsigned char>(head[6]) <= 3) {
    const auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(head[i])); };
    header_end = head[6] == 1 ? 10 + (byte(8) | byte(9) << 8)
                              : (head.size() < 12 ? size : 12 + (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24));
  }
  header_end = std::min(header_end, size);
  if (header_end > head.size()) {
    const size_t had = head.size();
    head.resize(header_end);
    if (std::fread(head.data() + had, 1, header_end - had, f.get()) != header_end - had)
      fail(Status::Io, path + ": cannot read");
  }
  NpyArray a;
  a.header = data::parse_npy_header(head, path);
  data::check_npy_data_length(a.header, size, path);
  const size_t bytes = static_cast<size_t>(a.header.elements) * a.header.item_bytes;
  a.data.resize((bytes + 7) / 8);
  if (std::fseek(f.get(), static_cast<long>(a.header.data_offset), SEEK_SET) != 0 ||
      std::fread(a.data.data(), 1, bytes, f.get()) != bytes)
    fail(Status::Io, path + ": cannot read its data (" + std::strerror(errno) + ")");
  return a;
}

}  // namespace

Dataset Dataset::from_npy(const std::string& x_path, const std::string& y_path) {
  const NpyArray x = read_npy(x_path);
  const NpyArray y = read_npy(y_path);
  if (x.header.shape[0] != y.header.shape[0])
    fail(Status::InvalidArgument, x_path + " has " + std::to_string(x.header.shape[0]) + " samples but " + y_path +
                                      " has " + std::to_string(y.header.shape[0]));
  return from_arrays(x.data.data(), x.header.dtype, x.header.shape, y.data.data(), y.header.dtype, y.header.shape);
}

}  // namespace kx
