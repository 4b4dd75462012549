// Where libkx looks for one of its run-time modules (libkx_cuda.so, libkx_workers.so).
#pragma once
#include <string>
#include <vector>

namespace kx::io {

// The configured path alone when one is given (an environment variable's), else, in order: the
// kx-MAJOR/ directory beside the code of libkx (where the packages install modules), the directory
// itself (a build tree), and the file name alone (the dynamic loader's search path).
std::vector<std::string> module_candidates(const char* file_name, const std::string& configured);

}  // namespace kx::io
