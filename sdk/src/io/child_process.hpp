// A helper program run to completion from libkx, for work that must not risk the caller's process
// (kx-hdf5-reader: libhdf5 on files kx cannot trust). Started with posix_spawn, never fork: the
// caller may have threads. Its stdin is a copy of the input in an anonymous memory file, its stdout is
// read here up to a size limit and a deadline, its stderr goes nowhere, and it inherits no other
// descriptor and no blocked or ignored signal. Past the limit or the deadline it is killed; it is
// always waited for, so no zombie is left behind.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kx::io {

struct ChildResult {
  std::string output;      // what it wrote to stdout (at most the limit)
  bool timed_out = false;  // killed at the deadline
  bool too_long = false;   // killed for writing more than the limit
  int exit_code = -1;      // its exit status when it exited
  int signal = 0;          // the signal that ended it, when one did
};

// Runs program with args (args[0] is its name). Io when it cannot be started (errno's text);
// Internal when the memory file or the pipe cannot be made.
ChildResult run_child(const std::string& program, const std::vector<std::string>& args, const std::string& input,
                      size_t max_output, std::chrono::milliseconds timeout);

}  // namespace kx::io
