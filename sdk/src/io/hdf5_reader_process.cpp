// Hdf5Tree::read: the file handed to kx-hdf5-reader, its stream parsed here.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "config/env_switches.hpp"
#include "config/test_hooks.hpp"
#include "io/child_process.hpp"
#include "io/hdf5_stream.hpp"
#include "io/hdf5_tree.hpp"
#include "io/module_search.hpp"
#include "kx/error.hpp"

namespace kx::io {

namespace {

constexpr const char* kReader = "kx-hdf5-reader";

// The reader's time, wall clock and CPU: generous for a file of that size (libhdf5 reads Keras's
// files at hundreds of MB/s; a 20 kB file takes milliseconds), short of a hang (libhdf5 1.10.8 spins
// forever in H5HG_read on some damaged global heaps: tests/fuzz/libhdf5_killers/).
std::chrono::seconds time_for(uint64_t file_size) { return std::chrono::seconds(10 + file_size / (4u << 20)); }

// Its address space: libhdf5 and what it links (under 40 MB mapped), the file twice (kx's copy and
// HDF5's), and the stream's worth of values.
uint64_t memory_for(uint64_t file_size) { return (uint64_t{256} << 20) + 2 * file_size + hdf5_stream::max_stream_bytes(file_size); }

std::string find_reader() {
  const std::string configured = config::path("KX_HDF5_READER");
  std::string tried;
  for (const std::string& p : module_candidates(kReader, configured)) {
    if (p.find('/') == std::string::npos) continue;  // an executable is run by its path, never searched for
    if (::access(p.c_str(), X_OK) == 0) return p;
    tried += "\n  " + p + ": " + std::strerror(errno);
  }
  fail(Status::Unsupported,
       "the HDF5 reader kx-hdf5-reader is missing, so Keras .h5 and .keras files cannot be read: it is installed "
       "beside libkx (libkx's package), or set KX_HDF5_READER to its path. Tried:" + tried);
}

std::string signal_name(int sig) {
  const char* d = ::strsignal(sig);
  return std::to_string(sig) + (d ? std::string(" (") + d + ")" : std::string());
}

}  // namespace

Hdf5Tree Hdf5Tree::read(const std::string& bytes, const std::string& source) {
  require(looks_like_hdf5(bytes), Status::Corrupt, source + ": not an HDF5 file (no HDF5 signature)");
  const std::string reader = find_reader();
  const uint64_t size = bytes.size();
  const std::chrono::milliseconds hook = config::test_hooks().hdf5_reader_timeout;
  const std::chrono::milliseconds timeout = hook.count() > 0 ? hook : std::chrono::milliseconds(time_for(size));
  const auto cpu = std::chrono::duration_cast<std::chrono::seconds>(timeout).count() + 1;
  const ChildResult r =
      run_child(reader, {kReader, "--size", std::to_string(size), "--memory", std::to_string(memory_for(size)),
                         "--cpu-seconds", std::to_string(cpu)},
                bytes, hdf5_stream::max_stream_bytes(size) + hdf5_stream::kErrorReserve, timeout);
  const std::string died = source + ": the HDF5 reader (" + reader + ") ";
  if (r.timed_out)
    fail(Status::Corrupt, died + "took longer than " + std::to_string(timeout.count()) +
                              " ms and was stopped: libhdf5 does not finish reading this file (damaged or hostile)");
  if (r.too_long) fail(Status::Corrupt, died + "wrote more than a file of this size holds and was stopped");
  if (r.signal == SIGXCPU)
    fail(Status::Corrupt, died + "used up its CPU time and was stopped: libhdf5 does not finish reading this file");
  if (r.signal == SIGKILL)
    fail(Status::Corrupt, died + "was killed (out of CPU time or memory) reading it: a damaged or hostile file");
  if (r.signal != 0)
    fail(Status::Corrupt, died + "died with signal " + signal_name(r.signal) +
                              " reading it: libhdf5 cannot read this damaged or hostile file");
  // 126 and 127: the reader's program or its dynamic loader could not be executed (as a shell says
  // it), so no file was read: kx lacks a working reader, as when it is missing.
  if (r.exit_code == 126 || r.exit_code == 127)
    fail(Status::Unsupported, died + "could not be started (exit status " + std::to_string(r.exit_code) +
                                  "): Keras's HDF5 files need a kx-hdf5-reader that runs on this machine");
  // The reader answers with exit status 0, errors included: any other status is a crash its
  // sanitizer caught (a sanitized build).
  if (r.exit_code > 0)
    fail(Status::Corrupt, died + "exited with status " + std::to_string(r.exit_code) +
                              " instead of answering: libhdf5 cannot read this damaged or hostile file");
  return Hdf5Tree(r.output, size, source);
}

}  // namespace kx::io
