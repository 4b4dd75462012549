#include "data/sample_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kx/error.hpp"

namespace kx {
namespace {

// Layout: the header text (magic, layout and identity, newline-terminated lines), one byte saying
// whether every sample was written ('1') or not ('0'), padding to 64 bytes, then the samples.
constexpr char kMagic[] = "kx sample cache 1\n";
constexpr size_t kAlign = 64;

[[noreturn]] void io_error(const std::string& path, const char* what) {
  fail(Status::Io, path + ": cannot " + what + " the dataset cache (" + std::strerror(errno) + ")");
}

bool read_all(int fd, void* dst, size_t n, off_t at) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, at);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
    at += got;
  }
  return true;
}

bool write_all(int fd, const void* src, size_t n, off_t at) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t put = ::pwrite(fd, p, n, at);
    if (put <= 0) {
      if (put < 0 && errno == EINTR) continue;
      return false;
    }
    p += put;
    n -= static_cast<size_t>(put);
    at += put;
  }
  return true;
}

}  // namespace

std::string SampleCache::header(const std::string& identity, int64_t samples, int64_t row_floats) {
  return std::string(kMagic) + "samples " + std::to_string(samples) + "\nfloats per sample " +
         std::to_string(row_floats) + "\nsource " + identity + "\n";
}

SampleCache::SampleCache(std::string path, std::string identity, int64_t samples, int64_t row_floats)
    : path_(std::move(path)), identity_(std::move(identity)), samples_(samples), row_floats_(row_floats),
      have_(static_cast<size_t>(samples), false) {
  if (path_.empty()) return;
  const std::string head = header(identity_, samples_, row_floats_);
  data_offset_ = (head.size() + 1 + kAlign - 1) / kAlign * kAlign;
  const size_t bytes = data_offset_ + static_cast<size_t>(samples_ * row_floats_) * sizeof(float);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) io_error(path_, "open");
  struct stat st {};
  std::string found(head.size() + 1, '\0');
  if (::fstat(fd_, &st) == 0 && static_cast<size_t>(st.st_size) == bytes &&
      read_all(fd_, found.data(), found.size(), 0) && found == head + "1") {
    reused_ = true;
    kept_ = samples_;
    have_.assign(have_.size(), true);
    return;
  }
  // Another source, another layout, or a run that stopped before every sample was written: anew.
  if (::ftruncate(fd_, 0) != 0 || ::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    const int saved = errno;
    ::close(fd_);
    errno = saved;
    io_error(path_, "size");
  }
  const std::string incomplete = head + "0";
  if (!write_all(fd_, incomplete.data(), incomplete.size(), 0)) {
    const int saved = errno;
    ::close(fd_);
    errno = saved;
    io_error(path_, "write");
  }
}

SampleCache::~SampleCache() {
  if (fd_ >= 0) ::close(fd_);
}

bool SampleCache::get(int64_t i, float* out) {
  std::lock_guard lock(mutex_);
  if (!have_[static_cast<size_t>(i)]) return false;
  const size_t row_bytes = static_cast<size_t>(row_floats_) * sizeof(float);
  if (fd_ < 0) {
    std::memcpy(out, memory_.data() + i * row_floats_, row_bytes);
    return true;
  }
  if (!read_all(fd_, out, row_bytes, static_cast<off_t>(data_offset_ + static_cast<size_t>(i) * row_bytes)))
    io_error(path_, "read");
  return true;
}

void SampleCache::put(int64_t i, const float* row) {
  std::lock_guard lock(mutex_);
  if (have_[static_cast<size_t>(i)]) return;
  const size_t row_bytes = static_cast<size_t>(row_floats_) * sizeof(float);
  if (fd_ < 0) {
    if (memory_.empty()) memory_.resize(static_cast<size_t>(samples_ * row_floats_));
    std::memcpy(memory_.data() + i * row_floats_, row, row_bytes);
  } else if (!write_all(fd_, row, row_bytes, static_cast<off_t>(data_offset_ + static_cast<size_t>(i) * row_bytes))) {
    io_error(path_, "write");
  }
  have_[static_cast<size_t>(i)] = true;
  if (++kept_ == samples_) mark_complete();
}

bool SampleCache::complete() {
  std::lock_guard lock(mutex_);
  return kept_ == samples_;
}

void SampleCache::mark_complete() {
  if (fd_ < 0) return;
  // The samples reach the disk before the byte that says they are all there.
  if (::fdatasync(fd_) != 0) io_error(path_, "sync");
  const char done = '1';
  const size_t at = header(identity_, samples_, row_floats_).size();
  if (!write_all(fd_, &done, 1, static_cast<off_t>(at)) || ::fdatasync(fd_) != 0) io_error(path_, "write");
}

}  // namespace kx
