#include "io/durable_write.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "kx/error.hpp"

namespace kx::io {

namespace {

// A file descriptor closed when it goes out of scope.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now, so that a failing close is seen.
  int close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

void fsync_or_fail(int fd, const std::string& path) {
  if (::fsync(fd) != 0) fail(Status::Io, "cannot sync " + path + ": " + std::strerror(errno));
}

}  // namespace

void write_file_durably(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  Descriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) fail(Status::Io, "cannot create " + tmp + ": " + std::strerror(errno));
  // Whatever fails before the rename, the half-written temporary goes and `path` is untouched.
  bool renamed = false;
  struct RemoveUnlessRenamed {
    const std::string& tmp;
    const bool& renamed;
    ~RemoveUnlessRenamed() {
      if (!renamed) ::unlink(tmp.c_str());
    }
  } cleanup{tmp, renamed};
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(Status::Io, "cannot write " + tmp + ": " + std::strerror(w < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(w);
  }
  fsync_or_fail(fd.get(), tmp);
  if (fd.close() != 0) fail(Status::Io, "cannot close " + tmp + ": " + std::strerror(errno));
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail(Status::Io, "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  renamed = true;
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const Descriptor dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.valid()) fail(Status::Io, "cannot open directory " + dir + ": " + std::strerror(errno));
  fsync_or_fail(dfd.get(), dir);
}

}  // namespace kx::io
