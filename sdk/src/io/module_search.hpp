// Where libkx looks for one of its run-time modules (libkx_cuda.so, libkx_workers.so).
#pragma once
#include <string>
#include <vector>

namespace kx::io {

// The configured path alone when one is given (an environment variable's), else, in order: the
// kx-MAJOR/ directory beside the code of libkx (where the packages install modules), the directory
// itself (a build tree), and the file name alone (the dynamic loader's search path).
std::vector<std::string> module_candidates(const char* file_name, const std::string& configured);

// The first candidate that loads, opened for good (RTLD_NODELETE: a module keeps process-wide state,
// a CUDA runtime or an engine's threads, and is never unloaded), and its exported `entry_name`.
struct FoundModule {
  std::string path;     // the candidate that loaded; empty when none did
  void* entry = nullptr;  // its entry function; null when it has none
  std::string tried;    // when none loaded: each candidate and why, one per line
};
FoundModule open_module(const char* file_name, const std::string& configured, const char* entry_name);

}  // namespace kx::io
