// The entry point of a backend module that libkx loads at run time (libkx_cuda.so). Both sides are
// built from this tree and share backend.hpp; interface_version keeps builds from being mixed.
#pragma once
#include <cstddef>
#include <memory>

#include "backend/backend.hpp"
#include "distribute/collective.hpp"

namespace kx::backend {

// What libkx lends a module. Errors are thrown by libkx's own code, so that they reach libkx's catch
// blocks as kx::Error whatever the module's symbol visibility.
struct HostServices {
  void (*raise)(int status, const char* message);  // throws kx::Error; never returns
};

struct ModuleApi {
  int interface_version;  // kInterfaceVersion of the module's build
  // The devices the module can use; 0 with the reason written to why (no driver, no device ...).
  int (*device_count)(char* why, size_t why_len);
  // One line about device `index` (name, memory, compute capability), NUL-terminated in buf.
  void (*describe_device)(int index, char* buf, size_t buf_len);
  // A backend on device `index`, with its own stream; errors go through host.raise.
  std::unique_ptr<Backend> (*create_backend)(int index, const HostServices& host);
  // The all-reduce between backends this module created on distinct devices (NCCL), one per replica
  // in replica order; errors (no NCCL, a device named twice) go through host.raise.
  std::unique_ptr<distribute::Collective> (*create_collective)(Backend* const* replicas, int count,
                                                               const HostServices& host);
};

// The module exports one C function of this name, returning its ModuleApi.
inline constexpr const char kModuleEntryName[] = "kx_backend_module_v2";
using ModuleEntry = const ModuleApi* (*)();

}  // namespace kx::backend
