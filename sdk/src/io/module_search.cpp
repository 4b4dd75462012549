#include "io/module_search.hpp"

#include <dlfcn.h>

#include <filesystem>

#include "io/shared_library.hpp"
#include "kx/version.hpp"

namespace kx::io {
namespace {

// The directory holding the code of this function: libkx.so's (or a test program's).
std::filesystem::path own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

}  // namespace

std::vector<std::string> module_candidates(const char* file_name, const std::string& configured) {
  if (!configured.empty()) return {configured};
  std::vector<std::string> paths;
  const std::filesystem::path dir = own_directory();
  if (!dir.empty()) {
    paths.push_back((dir / ("kx-" + std::to_string(KX_VERSION_MAJOR)) / file_name).string());
    paths.push_back((dir / file_name).string());
  }
  paths.emplace_back(file_name);  // the loader's search path
  return paths;
}

FoundModule open_module(const char* file_name, const std::string& configured, const char* entry_name) {
  FoundModule found;
  for (const std::string& p : module_candidates(file_name, configured)) {
    const SharedLibrary module(p, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!module.opened()) {
      found.tried += "\n  " + p + ": " + module.error();
      continue;
    }
    found.path = p;
    found.entry = module.symbol(entry_name);
    break;  // closing the module leaves it mapped (RTLD_NODELETE)
  }
  return found;
}

}  // namespace kx::io
