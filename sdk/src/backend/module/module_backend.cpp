#include "backend/module/module_backend.hpp"

#include <exception>
#include <string>
#include <utility>

#include "backend/out_of_memory.hpp"
#include "kx/error.hpp"

namespace kx::backend::module {
namespace {

// Throws what a failed entry reported.
void check(int32_t status, ModuleError& error) {
  if (status == 0) return;
  error.message[sizeof error.message - 1] = '\0';
  throw Error(static_cast<Status>(status), error.message);
}

// Calls an entry that may fail: its handle, a fresh error, then the arguments.
template <class Handle, class... Params, class... Args>
void call(int32_t (*entry)(Handle*, ModuleError*, Params...), Handle* handle, Args... args) {
  ModuleError error;
  error.message[0] = '\0';
  check(entry(handle, &error, args...), error);
}

// A module's handle, destroyed through its table when the owner goes.
template <class Handle>
using Owned = std::unique_ptr<Handle, void (*)(Handle*)>;

// An operation of backend_ops.hpp called through its entry: the arguments as the table takes them.
template <class M>
struct OperationCall;
template <class... Args>
struct OperationCall<void (Backend::*)(Args...)> {
  OperationEntryType<void (Backend::*)(Args...)> entry;
  BackendHandle* handle;
  void operator()(Args... args) const { call(entry, handle, CArg<Args>::pass(args)...); }
};

class ModuleTransferRing final : public TransferRing {
 public:
  ModuleTransferRing(const TransferRingTable& table, TransferRingHandle* handle)
      : table_(table), handle_(handle, table.destroy) {}
  void* host_slot(int slot) override { return table_.host_slot(handle_.get(), slot); }
  void* device_slots() override { return table_.device_slots(handle_.get()); }
  void wait_host_writable(int slot) override { call(table_.wait_host_writable, handle_.get(), slot); }
  void upload(int slot, size_t bytes) override { call(table_.upload, handle_.get(), slot, bytes); }
  void release(int slot) override { call(table_.release, handle_.get(), slot); }

 private:
  const TransferRingTable& table_;
  Owned<TransferRingHandle> handle_;
};

class ModuleStepGraph final : public StepGraph {
 public:
  ModuleStepGraph(const StepGraphTable& table, StepGraphHandle* handle)
      : table_(table), handle_(handle, table.destroy) {}
  void launch() override { call(table_.launch, handle_.get()); }

 private:
  const StepGraphTable& table_;
  Owned<StepGraphHandle> handle_;
};

// What a recording runs on libkx's side of the table: the body, and what it threw.
struct RecordedBody {
  const std::function<void()>& body;
  std::exception_ptr failure;

  // The C callback of BackendTable::capture: no exception may cross the table.
  static int32_t run(void* context) noexcept {
    auto& self = *static_cast<RecordedBody*>(context);
    try {
      self.body();
      return 0;
    } catch (...) {
      self.failure = std::current_exception();
      return 1;
    }
  }
};

class ModuleBackend final : public Backend {
 public:
  ModuleBackend(const ModuleTable& module, BackendHandle* handle)
      : module_(module), table_(*module.backend), handle_(handle, table_.destroy) {}

#define KX_OPERATION_CALL(name, params, args) \
  void name params override { OperationCall<decltype(&Backend::name)>{table_.name, handle_.get()} args; }
  KX_BACKEND_KERNELS(KX_OPERATION_CALL)
  KX_BACKEND_DIRECT_CALLS(KX_OPERATION_CALL)
#undef KX_OPERATION_CALL

  bool supports(const OpQuery& q) const override { return table_.supports(handle_.get(), &q) != 0; }
  std::string gemm_kernel_name() const override {
    char name[256] = {};
    table_.gemm_kernel_name(handle_.get(), name, sizeof name);
    return name;
  }
  DeviceBuffer allocate(size_t bytes) override {
    void* memory = nullptr;
    call(table_.allocate, handle_.get(), bytes, &memory);
    return DeviceBuffer(this, memory, bytes);
  }
  bool host_accessible() const override { return table_.host_accessible(handle_.get()) != 0; }
  void set_tf32(bool on) override { call(table_.set_tf32, handle_.get(), int32_t{on}); }
  LossSums take_loss_sums() override {
    LossSums sums;
    call(table_.take_loss_sums, handle_.get(), &sums);
    return sums;
  }
  void put_back_loss_sums(const LossSums& sums) override { call(table_.put_back_loss_sums, handle_.get(), &sums); }
  void sum_across(int64_t first, int64_t n, float* const* buffers, int count) override {
    call(table_.sum_across, handle_.get(), first, n, buffers, int32_t{count});
  }
  std::unique_ptr<TransferRing> make_transfer_ring(int slots, size_t slot_bytes) override {
    TransferRingHandle* ring = nullptr;
    call(table_.make_transfer_ring, handle_.get(), int32_t{slots}, slot_bytes, &ring);
    return std::make_unique<ModuleTransferRing>(*module_.transfer_ring, ring);
  }

  std::unique_ptr<StepGraph> capture(const std::function<void()>& body) override {
    RecordedBody recorded{body, nullptr};
    ModuleError error;
    error.message[0] = '\0';
    StepGraphHandle* handle = nullptr;
    const int32_t status = table_.capture(handle_.get(), &error, &RecordedBody::run, &recorded, &handle);
    std::unique_ptr<StepGraph> graph;
    if (handle) graph = std::make_unique<ModuleStepGraph>(*module_.step_graph, handle);
    if (recorded.failure) {
      if (is_out_of_memory(recorded.failure)) std::rethrow_exception(recorded.failure);
      return nullptr;  // as any recording that failed: the caller runs body itself
    }
    check(status, error);
    return graph;
  }

  const ModuleTable& module() const { return module_; }
  BackendHandle* handle() const { return handle_.get(); }

 protected:
  void release(void* p, size_t bytes) noexcept override { table_.release(handle_.get(), p, bytes); }

 private:
  const ModuleTable& module_;
  const BackendTable& table_;
  Owned<BackendHandle> handle_;
};

class ModuleCollective final : public distribute::Collective {
 public:
  ModuleCollective(const CollectiveTable& table, CollectiveHandle* handle, std::vector<BackendHandle*> replicas)
      : table_(table), handle_(handle, table.destroy), replicas_(std::move(replicas)) {}
  // The replica's backend is the one it was created with (be is that backend, on libkx's side).
  void all_reduce_sum(int replica, Backend&, float* buffer, int64_t n) override {
    call(table_.all_reduce_sum, handle_.get(), int32_t{replica}, replicas_[static_cast<size_t>(replica)], buffer, n);
  }
  bool capturable() const override { return table_.capturable(handle_.get()) != 0; }

 private:
  const CollectiveTable& table_;
  Owned<CollectiveHandle> handle_;
  std::vector<BackendHandle*> replicas_;
};

}  // namespace

std::unique_ptr<Backend> make_module_backend(const ModuleTable& table, int index, const BackendOptions& options) {
  ModuleError error;
  error.message[0] = '\0';
  BackendHandle* handle = nullptr;
  check(table.create_backend(&error, index, &options, &handle), error);
  require(handle != nullptr, Status::Device,
          "the backend module created no backend for device " + std::to_string(index));
  return std::make_unique<ModuleBackend>(table, handle);
}

namespace {

BackendHandle* handle_of_backend(const ModuleTable& table, Backend* be) {
  const auto* mine = dynamic_cast<const ModuleBackend*>(be);
  require(mine != nullptr && &mine->module() == &table, Status::Misuse,
          "a collective between GPUs was given a backend of another kind");
  return mine->handle();
}

}  // namespace

std::unique_ptr<distribute::Collective> make_module_collective(const ModuleTable& table,
                                                               const std::vector<Backend*>& replicas) {
  std::vector<BackendHandle*> handles;
  for (Backend* be : replicas) handles.push_back(handle_of_backend(table, be));
  ModuleError error;
  error.message[0] = '\0';
  CollectiveHandle* handle = nullptr;
  check(table.create_collective(&error, handles.data(), static_cast<int32_t>(handles.size()), &handle), error);
  require(handle != nullptr, Status::Device, "the backend module created no collective");
  return std::make_unique<ModuleCollective>(*table.collective, handle, std::move(handles));
}

std::string module_nccl_unavailable(const ModuleTable& table) {
  if (!table.nccl_available) return "the backend module has no NCCL between worker processes";
  char why[512] = {};
  return table.nccl_available(why, sizeof why) ? std::string() : std::string(why);
}

std::array<char, kNcclIdBytes> module_nccl_unique_id(const ModuleTable& table) {
  require(table.nccl_unique_id != nullptr, Status::Unsupported, module_nccl_unavailable(table));
  std::array<char, kNcclIdBytes> id{};
  ModuleError error;
  error.message[0] = '\0';
  check(table.nccl_unique_id(&error, id.data(), id.size()), error);
  return id;
}

std::unique_ptr<distribute::Collective> make_module_worker_collective(const ModuleTable& table, Backend* replica,
                                                                      const std::array<char, kNcclIdBytes>& id,
                                                                      int rank, int size,
                                                                      std::chrono::milliseconds timeout) {
  require(table.create_worker_collective != nullptr, Status::Unsupported, module_nccl_unavailable(table));
  BackendHandle* handle = handle_of_backend(table, replica);
  ModuleError error;
  error.message[0] = '\0';
  CollectiveHandle* collective = nullptr;
  check(table.create_worker_collective(&error, handle, id.data(), id.size(), rank, size,
                                       static_cast<int64_t>(timeout.count()), &collective),
        error);
  require(collective != nullptr, Status::Device, "the backend module created no collective between workers");
  return std::make_unique<ModuleCollective>(*table.collective, collective, std::vector<BackendHandle*>{handle});
}

}  // namespace kx::backend::module
