#include "distribute/workers_module.hpp"

#include "config/env_switches.hpp"
#include "io/module_search.hpp"

namespace kx::distribute {
namespace {

constexpr const char kModuleFile[] = "libkx_workers.so";

}  // namespace

const WorkersModule& WorkersModule::instance() {
  static const WorkersModule module;  // immutable once loaded; C++ makes the first call thread-safe
  return module;
}

WorkersModule::WorkersModule() {
  // The engine's threads and sockets live as long as its groups: the module is never unloaded.
  const io::FoundModule found = io::open_module(kModuleFile, config::path("KX_WORKERS_MODULE"), KX_WORKERS_ENTRY_NAME);
  const std::string& path = found.path;
  if (path.empty()) {
    status_ = std::string("no multi-worker engine module (") + kModuleFile +
              ", built when Gloo is found: apt install libgloo-dev) could be loaded:" + found.tried;
    return;
  }
  auto entry = reinterpret_cast<kx_workers_entry_fn>(found.entry);
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
