#include "backend/cuda_module.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda_driver_probe.hpp"
#include "backend/module/module_backend.hpp"
#include "config/env_switches.hpp"
#include "kx/error.hpp"
#include "io/module_search.hpp"

namespace kx::backend {
namespace {

constexpr const char kModuleFile[] = "libkx_cuda.so";

std::string configured_path() { return config::path("KX_CUDA_MODULE"); }

// Where two layout lists (module_abi.hpp's kLayoutList) part: the first entry that differs, named, with
// both sides' text.
std::string first_layout_difference(const std::string& module, const std::string& ours) {
  const auto entry = [](const std::string& list, size_t at) {
    return at < list.size() ? list.substr(at, list.find(';', at) - at) : std::string();
  };
  for (size_t at = 0; at < module.size() || at < ours.size();) {
    const std::string theirs = entry(module, at), mine = entry(ours, at);
    if (theirs != mine) {
      const std::string& named = mine.empty() ? theirs : mine;
      return named.substr(0, named.find(' ')) + " than this libkx (module: \"" + theirs + "\", libkx: \"" + mine +
             "\")";
    }
    at += mine.size() + 1;
  }
  return "types than this libkx";
}

}  // namespace

const CudaModule& CudaModule::load() {
  // What was found, by $KX_CUDA_MODULE: dlopen and the module's device discovery run once, not at every
  // device query. The map only grows, so the references it hands out stay valid.
  static std::mutex mutex;
  static std::map<std::string, CudaModule> found;
  const std::lock_guard<std::mutex> lock(mutex);
  const std::string key = configured_path();
  auto it = found.find(key);
  if (it == found.end()) it = found.emplace(key, open(kCudaDriverLibrary, key)).first;
  return it->second;
}

CudaModule CudaModule::open(const char* driver_library, const std::string& configured) {
  CudaModule m;
  const DriverProbe driver = probe_cuda_driver(driver_library);
  if (driver.devices == 0) {
    m.status_ = "no CUDA device: " + driver.why + "; the CUDA backend module (" +
                (configured.empty() ? std::string(kModuleFile) : configured) + ") was not loaded";
    return m;
  }
  const io::FoundModule found = io::open_module(kModuleFile, configured, module::kModuleEntryName);
  if (found.path.empty()) {
    m.status_ = std::string("no CUDA backend module (") + kModuleFile + ") could be loaded:" + found.tried;
    return m;
  }
  if (!found.entry) {
    m.status_ = found.path + " is not a kx backend module (no " + module::kModuleEntryName + ")";
    return m;
  }
  return from_table(reinterpret_cast<module::ModuleEntry>(found.entry)(), found.path);
}

CudaModule CudaModule::from_table(const module::ModuleTable* table, const std::string& origin) {
  CudaModule m;
  if (!table || table->interface_version != module::kInterfaceVersion) {
    m.status_ = origin + " was built for backend interface " + std::to_string(table ? table->interface_version : -1) +
                ", this libkx needs " + std::to_string(module::kInterfaceVersion) + ": install matching kx packages";
    return m;
  }
  if (!table->operations || std::strcmp(table->operations, module::kOperationList) != 0) {
    m.status_ = origin + " was built with other backend operations than this libkx: install matching kx packages";
    return m;
  }
  if (!table->layouts || std::strcmp(table->layouts, module::kLayoutList) != 0) {
    m.status_ = origin + " was built with another layout of " +
                first_layout_difference(table->layouts ? table->layouts : "", module::kLayoutList) +
                ": install matching kx packages";
    return m;
  }
  char why[512] = {};
  const int count = table->device_count(why, sizeof why);
  m.table_ = table;
  m.device_count_ = count > 0 ? count : 0;
  m.status_ = origin + ": " + (count > 0 ? std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s")
                                         : std::string("no CUDA device: ") + why);
  return m;
}

std::string CudaModule::describe_device(int index) const {
  require(table_ && index >= 0 && index < device_count_, Status::Device,
          "no CUDA device " + std::to_string(index) + " (" + status_ + ")");
  char buf[256] = {};
  table_->describe_device(index, buf, sizeof buf);
  return buf;
}

std::unique_ptr<Backend> CudaModule::create_backend(int index, const BackendOptions& options) const {
  require(table_ && index >= 0 && index < device_count_, Status::Device,
          "no CUDA device " + std::to_string(index) + " (" + status_ + ")");
  return module::make_module_backend(*table_, index, options);
}

std::unique_ptr<distribute::Collective> CudaModule::create_collective(const std::vector<Backend*>& replicas) const {
  require(table_ != nullptr, Status::Device, "no CUDA backend module (" + status_ + ")");
  return module::make_module_collective(*table_, replicas);
}

std::string CudaModule::nccl_unavailable() const {
  if (!table_) return "no CUDA backend module (" + status_ + ")";
  return module::module_nccl_unavailable(*table_);
}

std::array<char, module::kNcclIdBytes> CudaModule::nccl_unique_id() const {
  require(table_ != nullptr, Status::Device, "no CUDA backend module (" + status_ + ")");
  return module::module_nccl_unique_id(*table_);
}

std::unique_ptr<distribute::Collective> CudaModule::create_worker_collective(
    Backend* replica, const std::array<char, module::kNcclIdBytes>& id, int rank, int size,
    std::chrono::milliseconds timeout) const {
  require(table_ != nullptr, Status::Device, "no CUDA backend module (" + status_ + ")");
  return module::make_module_worker_collective(*table_, replica, id, rank, size, timeout);
}

}  // namespace kx::backend
