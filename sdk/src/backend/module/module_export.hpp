// The module's side of the C table: C++ objects of the module (a Backend, its rings and recorded steps,
// a Collective) behind opaque handles, every entry catching what they throw and returning it as a
// status and message. Compiled into the CUDA module, and into the tests that put the CPU backend behind
// the same table.
#pragma once
#include <cstdio>
#include <memory>
#include <new>

#include "backend/backend.hpp"
#include "backend/module/module_abi.hpp"
#include "distribute/collective.hpp"
#include "kx/error.hpp"

namespace kx::backend::module {

// Writes the message and returns the status code of a failed entry.
int32_t report(ModuleError* error, Status status, const char* message) noexcept;

// Runs body; returns 0, or the status of what it threw with the message written to error.
template <class Body>
int32_t guarded(ModuleError* error, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    return report(error, e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return report(error, Status::OutOfMemory, "out of host memory in the backend module");
  } catch (const std::exception& e) {
    return report(error, Status::Internal, e.what());
  } catch (...) {
    return report(error, Status::Internal, "an unknown exception in the backend module");
  }
}

// Ownership of module objects passed to libkx as handles (null stays null), taken back by the tables'
// destroy entries.
BackendHandle* to_handle(std::unique_ptr<Backend> backend);
CollectiveHandle* to_handle(std::unique_ptr<distribute::Collective> collective);
// The module's object behind a handle it gave out.
Backend& backend_of(BackendHandle* handle);

// The tables of every handle kind, for any module.
extern const BackendTable kBackendTable;
extern const TransferRingTable kTransferRingTable;
extern const StepGraphTable kStepGraphTable;
extern const CollectiveTable kCollectiveTable;

// A module's whole table from its entries of its own (without the NCCL ones: a module without them).
constexpr ModuleTable make_module_table(decltype(ModuleTable::device_count) device_count,
                                        decltype(ModuleTable::describe_device) describe_device,
                                        decltype(ModuleTable::create_backend) create_backend,
                                        decltype(ModuleTable::create_collective) create_collective,
                                        decltype(ModuleTable::nccl_available) nccl_available = nullptr,
                                        decltype(ModuleTable::nccl_unique_id) nccl_unique_id = nullptr,
                                        decltype(ModuleTable::create_worker_collective) create_worker_collective =
                                            nullptr) {
  return ModuleTable{kInterfaceVersion, kOperationList,    kLayoutList,    device_count,
                     describe_device,   create_backend,    create_collective, nccl_available,
                     nccl_unique_id,    create_worker_collective, &kBackendTable, &kTransferRingTable,
                     &kStepGraphTable,  &kCollectiveTable};
}

}  // namespace kx::backend::module
