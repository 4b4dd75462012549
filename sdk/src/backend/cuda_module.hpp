// libkx's handle on the CUDA backend module. libkx has no CUDA dependency: it looks for
// libkx_cuda.so at run time and reports no CUDA device when the module, the driver or a GPU is missing.
// Everything between the two goes through the module's C table (module/module_abi.hpp).
#pragma once
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/module/module_abi.hpp"
#include "distribute/collective.hpp"

namespace kx::backend {

class CudaModule {
 public:
  // Asks the CUDA driver (libcuda.so.1) for GPUs first and, only when there is one, looks for the
  // module: $KX_CUDA_MODULE if set, else next to the code of libkx (its kx-MAJOR/
  // subdirectory, then the directory itself), else the dynamic loader's search path. Never throws:
  // a module that is missing or unusable gives a CudaModule with no devices and says why in status().
  // The search runs once per process (for each value of $KX_CUDA_MODULE); the module stays loaded for
  // the life of the process (its CUDA runtime must not be unloaded).
  static const CudaModule& load();
  // What load() does, with the driver library to ask first (tests give a fake): the module is looked
  // for only when the driver reports a GPU, else the status says what is missing.
  static CudaModule open(const char* driver_library, const std::string& configured);
  // The module whose entry returned `table`, checked against this libkx; origin says where it came from.
  static CudaModule from_table(const module::ModuleTable* table, const std::string& origin);

  int device_count() const { return device_count_; }
  // Where the module came from and what it found, or why there is no CUDA device.
  const std::string& status() const { return status_; }
  std::string describe_device(int index) const;
  // Status::Device when the module has no such device.
  std::unique_ptr<Backend> create_backend(int index, const BackendOptions& options = {}) const;
  // NCCL between backends this module created, one per distinct GPU, in replica order.
  std::unique_ptr<distribute::Collective> create_collective(const std::vector<Backend*>& replicas) const;
  // NCCL between worker processes, one GPU each: why it cannot be used here (empty when it can), the
  // chief's new id, and each worker's collective on its replica (see module_backend.hpp).
  std::string nccl_unavailable() const;
  std::array<char, module::kNcclIdBytes> nccl_unique_id() const;
  std::unique_ptr<distribute::Collective> create_worker_collective(Backend* replica,
                                                                   const std::array<char, module::kNcclIdBytes>& id,
                                                                   int rank, int size,
                                                                   std::chrono::milliseconds timeout) const;

 private:
  const module::ModuleTable* table_ = nullptr;
  int device_count_ = 0;
  std::string status_;
};

}  // namespace kx::backend
