#include "backend/module/module_export.hpp"

#include <string>
#include <utility>

namespace kx::backend::module {
namespace {

// Each handle is the module's object itself, seen through an opaque type.
template <class Handle, class Object>
Handle* handle_of(std::unique_ptr<Object> object) {
  return reinterpret_cast<Handle*>(object.release());
}
template <class Object, class Handle>
Object& object_of(Handle* handle) {
  return *reinterpret_cast<Object*>(handle);
}
template <class Object, class Handle>
void destroy(Handle* handle) noexcept {
  std::unique_ptr<Object> owned(&object_of<Object>(handle));
}

TransferRing& ring_of(TransferRingHandle* h) { return object_of<TransferRing>(h); }
StepGraph& graph_of(StepGraphHandle* h) { return object_of<StepGraph>(h); }
distribute::Collective& collective_of(CollectiveHandle* h) { return object_of<distribute::Collective>(h); }

// The entry of one operation of backend_ops.hpp: the arguments back to C++, then the member function.
template <class M, M member>
struct Operation;
template <class... Args, void (Backend::*member)(Args...)>
struct Operation<void (Backend::*)(Args...), member> {
  static int32_t call(BackendHandle* h, ModuleError* e, CArgType<Args>... args) noexcept {
    return guarded(e, [&] { (backend_of(h).*member)(CArg<Args>::take(args)...); });
  }
};

// Thrown inside a recording when libkx's body reported a failure (its error stays on libkx's side):
// the backend ends the recording as for any failure.
struct BodyFailed {};

int32_t capture(BackendHandle* h, ModuleError* e, int32_t (*body)(void* context), void* context,
                StepGraphHandle** graph) noexcept {
  *graph = nullptr;
  return guarded(e, [&] {
    std::unique_ptr<StepGraph> recorded = backend_of(h).capture([&] {
      if (body(context) != 0) throw BodyFailed{};
    });
    *graph = handle_of<StepGraphHandle>(std::move(recorded));
  });
}

void gemm_kernel_name(BackendHandle* h, char* buf, size_t buf_len) noexcept {
  std::string name;
  ModuleError ignored;
  guarded(&ignored, [&] { name = backend_of(h).gemm_kernel_name(); });
  std::snprintf(buf, buf_len, "%s", name.c_str());
}

}  // namespace

int32_t report(ModuleError* error, Status status, const char* message) noexcept {
  std::snprintf(error->message, sizeof error->message, "%s", message ? message : "");
  return status == Status::Ok ? static_cast<int32_t>(Status::Internal) : static_cast<int32_t>(status);
}

BackendHandle* to_handle(std::unique_ptr<Backend> backend) { return handle_of<BackendHandle>(std::move(backend)); }
CollectiveHandle* to_handle(std::unique_ptr<distribute::Collective> collective) {
  return handle_of<CollectiveHandle>(std::move(collective));
}
Backend& backend_of(BackendHandle* handle) { return object_of<Backend>(handle); }

constinit const BackendTable kBackendTable{
#define KX_OPERATION_THUNK(name, params, args) .name = &Operation<decltype(&Backend::name), &Backend::name>::call,
    KX_BACKEND_KERNELS(KX_OPERATION_THUNK) KX_BACKEND_DIRECT_CALLS(KX_OPERATION_THUNK)
#undef KX_OPERATION_THUNK
    .destroy = &destroy<Backend, BackendHandle>,
    .supports = [](BackendHandle* h, const OpQuery* q) noexcept -> int32_t { return backend_of(h).supports(*q); },
    .gemm_kernel_name = &gemm_kernel_name,
    .allocate = [](BackendHandle* h, ModuleError* e, size_t bytes, void** memory) noexcept {
      *memory = nullptr;
      return guarded(e, [&] { *memory = backend_of(h).allocate(bytes).detach(); });
    },
    // A buffer of the backend again, which releases its memory as it goes.
    .release = [](BackendHandle* h, void* memory, size_t bytes) noexcept {
      DeviceBuffer returned(&backend_of(h), memory, bytes);
    },
    .host_accessible = [](BackendHandle* h) noexcept -> int32_t { return backend_of(h).host_accessible(); },
    .set_tf32 = [](BackendHandle* h, ModuleError* e, int32_t on) noexcept {
      return guarded(e, [&] { backend_of(h).set_tf32(on != 0); });
    },
    .take_loss_sums = [](BackendHandle* h, ModuleError* e, LossSums* sums) noexcept {
      return guarded(e, [&] { *sums = backend_of(h).take_loss_sums(); });
    },
    .put_back_loss_sums = [](BackendHandle* h, ModuleError* e, const LossSums* sums) noexcept {
      return guarded(e, [&] { backend_of(h).put_back_loss_sums(*sums); });
    },
    .sum_across = [](BackendHandle* h, ModuleError* e, int64_t first, int64_t n, float* const* buffers,
                     int32_t count) noexcept {
      return guarded(e, [&] { backend_of(h).sum_across(first, n, buffers, count); });
    },
    .make_transfer_ring = [](BackendHandle* h, ModuleError* e, int32_t slots, size_t slot_bytes,
                             TransferRingHandle** ring) noexcept {
      *ring = nullptr;
      return guarded(e, [&] {
        *ring = handle_of<TransferRingHandle>(backend_of(h).make_transfer_ring(slots, slot_bytes));
      });
    },
    .capture = &capture,
};

constinit const TransferRingTable kTransferRingTable{
    .destroy = &destroy<TransferRing, TransferRingHandle>,
    .host_slot = [](TransferRingHandle* h, int32_t slot) noexcept { return ring_of(h).host_slot(slot); },
    .device_slots = [](TransferRingHandle* h) noexcept { return ring_of(h).device_slots(); },
    .wait_host_writable = [](TransferRingHandle* h, ModuleError* e, int32_t slot) noexcept {
      return guarded(e, [&] { ring_of(h).wait_host_writable(slot); });
    },
    .upload = [](TransferRingHandle* h, ModuleError* e, int32_t slot, size_t bytes) noexcept {
      return guarded(e, [&] { ring_of(h).upload(slot, bytes); });
    },
    .release = [](TransferRingHandle* h, ModuleError* e, int32_t slot) noexcept {
      return guarded(e, [&] { ring_of(h).release(slot); });
    },
};

constinit const StepGraphTable kStepGraphTable{
    .destroy = &destroy<StepGraph, StepGraphHandle>,
    .launch = [](StepGraphHandle* h, ModuleError* e) noexcept { return guarded(e, [&] { graph_of(h).launch(); }); },
};

constinit const CollectiveTable kCollectiveTable{
    .destroy = &destroy<distribute::Collective, CollectiveHandle>,
    .capturable = [](CollectiveHandle* h) noexcept -> int32_t { return collective_of(h).capturable(); },
    .all_reduce_sum = [](CollectiveHandle* h, ModuleError* e, int32_t replica, BackendHandle* replica_backend,
                         float* buffer, int64_t n) noexcept {
      return guarded(e, [&] { collective_of(h).all_reduce_sum(replica, backend_of(replica_backend), buffer, n); });
    },
};

}  // namespace kx::backend::module
