#include "distribute/workers_module.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "io/module_search.hpp"

namespace kx::distribute {
namespace {

constexpr const char kModuleFile[] = "libkx_workers.so";

std::vector<std::string> candidates() {
  const char* env = std::getenv("KX_WORKERS_MODULE");
  return io::module_candidates(kModuleFile, env ? env : "");
}

}  // namespace

const WorkersModule& WorkersModule::instance() {
  static const WorkersModule module;  // immutable once loaded; C++ makes the first call thread-safe
  return module;
}

WorkersModule::WorkersModule() {
  std::string tried;
  void* handle = nullptr;
  std::string path;
  for (const std::string& p : candidates()) {
    // RTLD_NODELETE: the engine's threads and sockets live as long as its groups, which may outlive
    // any handle; the module is never unloaded.
    handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle) {
      path = p;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + p + ": " + (why ? why : "not loadable");
  }
  if (!handle) {
    status_ = std::string("no multi-worker engine module (") + kModuleFile +
              ", built when Gloo is found: apt install libgloo-dev) could be loaded:" + tried;
    return;
  }
  auto entry = reinterpret_cast<kx_workers_entry_fn>(dlsym(handle, KX_WORKERS_ENTRY_NAME));
  dlclose(handle);  // RTLD_NODELETE keeps it mapped
  if (!entry) {
    status_ = path + " is not a kx multi-worker module (no " KX_WORKERS_ENTRY_NAME ")";
    return;
  }
  const kx_workers_api* api = entry();
  if (!api || api->interface_version != KX_WORKERS_INTERFACE_VERSION) {
    status_ = path + " was built for multi-worker interface " + std::to_string(api ? api->interface_version : -1) +
              ", this libkx needs " + std::to_string(KX_WORKERS_INTERFACE_VERSION) + ": install matching kx packages";
    return;
  }
  api_ = api;
  status_ = path + ": " + (api->description ? api->description : "multi-worker engine");
}

}  // namespace kx::distribute
