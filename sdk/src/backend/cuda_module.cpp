#include "backend/cuda_module.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "kx/error.hpp"
#include "kx/version.hpp"

namespace kx::backend {
namespace {

constexpr const char kModuleFile[] = "libkx_cuda.so";

[[noreturn]] void raise_error(int status, const char* message) {
  throw Error(static_cast<Status>(status), message ? message : "error in the CUDA backend module");
}

constexpr HostServices kHostServices{&raise_error};

// The directory holding the code of this function: libkx.so's (or a test program's).
std::filesystem::path own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

std::vector<std::string> candidates() {
  if (const char* env = std::getenv("KX_CUDA_MODULE"); env && *env) return {env};
  std::vector<std::string> paths;
  const std::filesystem::path dir = own_directory();
  if (!dir.empty()) {
    paths.push_back((dir / ("kx-" + std::to_string(KX_VERSION_MAJOR)) / kModuleFile).string());
    paths.push_back((dir / kModuleFile).string());
  }
  paths.emplace_back(kModuleFile);  // the loader's search path
  return paths;
}

}  // namespace

CudaModule CudaModule::load() {
  CudaModule m;
  std::string tried;
  void* handle = nullptr;
  std::string path;
  for (const std::string& p : candidates()) {
    // RTLD_NODELETE: the module's CUDA runtime keeps process-wide state and must never be unloaded.
    handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle) {
      path = p;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + p + ": " + (why ? why : "not loadable");
  }
  if (!handle) {
    m.status_ = std::string("no CUDA backend module (") + kModuleFile + ") could be loaded:" + tried;
    return m;
  }
  // The handle is released at once: RTLD_NODELETE keeps the module mapped, and a later dlopen of
  // the same file finds it loaded.
  auto entry = reinterpret_cast<ModuleEntry>(dlsym(handle, kModuleEntryName));
  dlclose(handle);
  if (!entry) {
    m.status_ = path + " is not a kx backend module (no " + kModuleEntryName + ")";
    return m;
  }
  const ModuleApi* api = entry();
  if (!api || api->interface_version != kInterfaceVersion) {
    m.status_ = path + " was built for backend interface " + std::to_string(api ? api->interface_version : -1) +
                ", this libkx needs " + std::to_string(kInterfaceVersion) + ": install matching kx packages";
    return m;
  }
  char why[512] = {};
  const int count = api->device_count(why, sizeof why);
  m.api_ = api;
  m.device_count_ = count > 0 ? count : 0;
  m.status_ = path + ": " + (count > 0 ? std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s")
                                       : std::string("no CUDA device: ") + why);
  return m;
}

std::string CudaModule::describe_device(int index) const {
  require(api_ && index >= 0 && index < device_count_, Status::Device,
          "no CUDA device " + std::to_string(index) + " (" + status_ + ")");
  char buf[256] = {};
  api_->describe_device(index, buf, sizeof buf);
  return buf;
}

std::unique_ptr<Backend> CudaModule::create_backend(int index) const {
  require(api_ && index >= 0 && index < device_count_, Status::Device,
          "no CUDA device " + std::to_string(index) + " (" + status_ + ")");
  std::unique_ptr<Backend> be = api_->create_backend(index, kHostServices);
  require(be != nullptr, Status::Device, "the CUDA module created no backend for device " + std::to_string(index));
  return be;
}

std::unique_ptr<distribute::Collective> CudaModule::create_collective(const std::vector<Backend*>& replicas) const {
  require(api_ != nullptr, Status::Device, "no CUDA backend module (" + status_ + ")");
  std::unique_ptr<distribute::Collective> c =
      api_->create_collective(replicas.data(), static_cast<int>(replicas.size()), kHostServices);
  require(c != nullptr, Status::Device, "the CUDA module created no collective");
  return c;
}

}  // namespace kx::backend
