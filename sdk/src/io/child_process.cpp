#include "io/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>

#include "kx/error.hpp"

extern char** environ;

namespace kx::io {

namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// A started child: killed and waited for when it goes, unless wait() reaped it.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  void kill() { ::kill(pid_, SIGKILL); }
  // Its exit status (waitpid's), killed first if it has not ended by the deadline; false when the
  // status cannot be known (a caller that ignores SIGCHLD has its children reaped by the kernel).
  bool wait(std::chrono::steady_clock::time_point deadline, int& status) {
    pid_t r;
    while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 || (r < 0 && errno == EINTR)) {
      if (r == 0 && std::chrono::steady_clock::now() >= deadline) kill();
      ::usleep(1000);
    }
    pid_ = -1;
    return r > 0;
  }

 private:
  pid_t pid_;
};

// spawn attributes and file actions, destroyed with the scope.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    require(n > 0, Status::Internal, std::string("cannot fill the helper's input: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

// A descriptor moved above 0, 1 and 2 (a caller that closed its stdin or stdout gets those numbers
// for new files): the child's dup2 onto them must copy, never be a no-op that keeps close-on-exec.
Fd above_stdio(Fd fd) {
  if (fd.get() > 2) return fd;
  Fd moved(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
  require(moved.get() >= 0, Status::Internal, std::string("fcntl: ") + std::strerror(errno));
  return moved;
}

}  // namespace

ChildResult run_child(const std::string& program, const std::vector<std::string>& args, const std::string& input,
                      size_t max_output, std::chrono::milliseconds timeout) {
  // The input as a file in memory: the child reads it at its pace, and libkx never blocks writing it.
  Fd created(::memfd_create("kx-helper-input", MFD_CLOEXEC));
  require(created.get() >= 0, Status::Internal, std::string("memfd_create: ") + std::strerror(errno));
  Fd in = above_stdio(std::move(created));
  write_all(in.get(), input);
  require(::lseek(in.get(), 0, SEEK_SET) == 0, Status::Internal, "cannot rewind the helper's input");
  int p[2];
  require(::pipe2(p, O_CLOEXEC) == 0, Status::Internal, std::string("pipe2: ") + std::strerror(errno));
  Fd out_read(p[0]);
  Fd out_write = above_stdio(Fd(p[1]));

  SpawnSetup s;
  posix_spawn_file_actions_adddup2(&s.actions, in.get(), 0);
  posix_spawn_file_actions_adddup2(&s.actions, out_write.get(), 1);
  posix_spawn_file_actions_addopen(&s.actions, 2, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);  // the caller's descriptors stay its own
#endif
  // Default dispositions and no blocked signal: the caller's SIGPIPE policy or mask is not the child's.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&s.attr, &all);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, program.c_str(), &s.actions, &s.attr, argv.data(), environ);
  require(err == 0, Status::Io, "cannot start " + program + ": " + std::strerror(err));
  Child child(pid);
  out_write.reset();  // only the child writes: its exit is our end of file
  in.reset();

  ChildResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string chunk(1 << 16, '\0');
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      child.kill();
      break;
    }
    pollfd pfd{out_read.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      child.kill();
      fail(Status::Internal, std::string("poll: ") + std::strerror(errno));
    }
    if (ready <= 0) continue;
    const ssize_t n = ::read(out_read.get(), chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // end of file: the child closed its stdout (it has exited, or is about to)
    if (r.output.size() + static_cast<size_t>(n) > max_output) {
      r.too_long = true;
      child.kill();
      break;
    }
    r.output.append(chunk.data(), static_cast<size_t>(n));
  }
  int status = 0;
  if (child.wait(deadline, status)) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace kx::io
