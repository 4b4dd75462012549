// libkx's side of the C table: a Backend, and the rings, recorded steps and collectives it makes, whose
// every call goes through a module's table, with a failed status thrown again as kx::Error.
#pragma once
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/module/module_abi.hpp"
#include "distribute/collective.hpp"

namespace kx::backend::module {

// A backend on device `index` of the module whose table this is (which outlives it).
std::unique_ptr<Backend> make_module_backend(const ModuleTable& table, int index, const BackendOptions& options);

// The module's collective between backends it made (each from make_module_backend with this table), one
// per replica in replica order; Status::Misuse for a backend of another kind.
std::unique_ptr<distribute::Collective> make_module_collective(const ModuleTable& table,
                                                               const std::vector<Backend*>& replicas);

// NCCL between worker processes through the module (module_abi.hpp): why it cannot be used (empty when
// it can), the chief's new id, and a worker's collective on `replica` (from make_module_backend with
// this table) whose join and sums fail with Status::Comm past `timeout`.
std::string module_nccl_unavailable(const ModuleTable& table);
std::array<char, kNcclIdBytes> module_nccl_unique_id(const ModuleTable& table);
std::unique_ptr<distribute::Collective> make_module_worker_collective(const ModuleTable& table, Backend* replica,
                                                                      const std::array<char, kNcclIdBytes>& id,
                                                                      int rank, int size,
                                                                      std::chrono::milliseconds timeout);

}  // namespace kx::backend::module
