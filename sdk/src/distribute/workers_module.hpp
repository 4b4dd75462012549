// libkx's handle on the cross-process engine module (libkx_workers.so). libkx links neither Gloo nor
// MPI: it opens the module at run time, once per process, the first time a multi-worker group is
// joined, and reports why when it cannot.
#pragma once
#include <string>

#include "distribute/workers_module_api.h"

namespace kx::distribute {

class WorkersModule {
 public:
  // Looks for the module once: $KX_WORKERS_MODULE if set, else beside the code of libkx (its kx-MAJOR/
  // subdirectory, then the directory itself), else the dynamic loader's search path. Never throws.
  static const WorkersModule& instance();

  // The module's table, or null when it is missing or unusable (status() says why).
  const kx_workers_api* api() const { return api_; }
  // Where the module came from and what its engine is, or why there is none.
  const std::string& status() const { return status_; }

 private:
  WorkersModule();
  const kx_workers_api* api_ = nullptr;
  std::string status_;
};

}  // namespace kx::distribute
