#include "io/hdf5_reader/stream_writer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kx::io::hdf5_stream {

StreamWriter::StreamWriter(int fd, uint64_t budget) : fd_(fd), budget_(budget) {
  put(kMagic, sizeof kMagic);
  u32(kVersion);
}

void StreamWriter::ensure_room(uint64_t bytes) const {
  if (written_ + bytes > budget_)
    fail(Status::Corrupt, "expands to more than " + std::to_string(budget_) +
                              " bytes of names and values, more than a file of its size holds (a bomb, or hard "
                              "links that repeat its groups)");
}

void StreamWriter::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  put(s.data(), s.size());
}

void StreamWriter::put(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  written_ += n;
  buffer_.append(p, n);
  if (buffer_.size() >= (size_t{1} << 16)) flush();
}

void StreamWriter::error(Status status, const std::string& message) {
  budget_ += kErrorReserve;
  const std::string text = message.substr(0, 4096);
  tag(Tag::Error);
  i32(static_cast<int32_t>(status));
  str(text);
  flush();
}

void StreamWriter::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);  // libkx stopped reading: it has its answer
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

}  // namespace kx::io::hdf5_stream
