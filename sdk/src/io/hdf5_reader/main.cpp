// kx-hdf5-reader: libkx's HDF5 reader, run as its own process (io/hdf5_tree.hpp starts it). The file's
// bytes come on stdin (exactly --size of them), the stream of io/hdf5_stream.hpp goes to stdout. libhdf5
// is not hardened against hostile files (1.10.8 crashes in H5HG_read on a damaged global heap): here a
// crash, a spin or a runaway allocation ends this process, within the limits set below, and libkx
// reports the file as damaged.
//
//   kx-hdf5-reader --size BYTES --memory BYTES --cpu-seconds N
//
// --memory bounds its address space (0: no bound, for a run by hand); --cpu-seconds its CPU time.
// Exit status 0 with a whole stream (the file, or an error record); 2 for a wrong command line.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "io/hdf5_reader/hdf5_walk.hpp"

namespace {

using namespace kx::io::hdf5_stream;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

bool number(const char* text, uint64_t& out) {
  if (text == nullptr || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = v;
  return true;
}

void limit(int resource, uint64_t soft, uint64_t hard) {
  const rlimit r{static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)};
  setrlimit(resource, &r);  // best effort: libkx's timeout and stream bounds hold regardless
}

// Every descriptor but stdin, stdout and stderr: libhdf5 gets nothing of the caller's.
void close_inherited() {
  const long top = sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (top > 0 && top < 65536 ? top : 65536); ++fd) close(fd);
}

bool read_input(std::string& bytes, uint64_t size) {
  struct stat st {};
  if (fstat(0, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) != size) return false;
  bytes.resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(0, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size = 0, memory = 0, cpu = 0;
  bool have_size = false, have_memory = false, have_cpu = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--size") have_size = number(argv[i + 1], size);
    else if (flag == "--memory") have_memory = number(argv[i + 1], memory);
    else if (flag == "--cpu-seconds") have_cpu = number(argv[i + 1], cpu);
  }
  if (argc != 7 || !have_size || !have_memory || !have_cpu) {
    static const char usage[] = "usage: kx-hdf5-reader --size BYTES --memory BYTES --cpu-seconds N < file > stream\n";
    [[maybe_unused]] const ssize_t ignored = write(2, usage, sizeof usage - 1);
    return 2;
  }
  close_inherited();
  limit(RLIMIT_CORE, 0, 0);    // a crash leaves no core file behind
  limit(RLIMIT_CPU, cpu, cpu + 1);  // SIGXCPU, then SIGKILL
  // The sanitizers reserve terabytes of address space for their shadow memory: no memory limit there.
  if (!kSanitized && memory > 0) limit(RLIMIT_AS, memory, memory);

  StreamWriter out(1, max_stream_bytes(size));
  try {
    std::string bytes;
    if (!read_input(bytes, size)) kx::fail(kx::Status::Internal, "the HDF5 reader was given fewer bytes than --size");
    walk_hdf5(bytes, out);
  } catch (const kx::Error& e) {
    out.error(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    out.error(kx::Status::Corrupt, "needs more memory than a file of its size justifies");
  }
  out.flush();
  // No exit handlers: libhdf5's own clean-up could trip over a damaged file's state, and a leak
  // checker has nothing to say about a process that ends here.
  _exit(0);
}
