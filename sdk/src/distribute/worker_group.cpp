#include "distribute/worker_group.hpp"

#include <array>
#include <new>

#include "distribute/workers_module.hpp"
#include "kx/error.hpp"

namespace kx::distribute {
namespace {

// Room for the module's one-line messages.
using MessageBuffer = std::array<char, 2048>;

// Turns a module status into a kx::Error (the module never throws across the boundary).
void check(int32_t status, const MessageBuffer& message) {
  if (status == 0) return;
  const std::string text = message[0] ? std::string(message.data()) : "multi-worker engine error " + std::to_string(status);
  throw Error(static_cast<Status>(status), text);
}

int64_t checked_timeout(std::chrono::milliseconds timeout) {
  require(timeout.count() > 0, Status::InvalidArgument,
          "the multi-worker timeout must be positive (got " + std::to_string(timeout.count()) + " ms)");
  return timeout.count();
}

}  // namespace

WorkerGroup::WorkerGroup(JoinKey, const kx_workers_api* api, kx_workers_group* handle, int rank, int size,
                         std::chrono::milliseconds timeout, std::vector<std::string> addresses)
    : api_(api), handle_(handle), rank_(rank), size_(size), timeout_(timeout), addresses_(std::move(addresses)) {}

WorkerGroup::~WorkerGroup() {
  if (api_) api_->leave(handle_);
}

std::unique_ptr<WorkerGroup> WorkerGroup::join(const ClusterSpec& spec, std::chrono::milliseconds timeout) {
  const int64_t timeout_ms = checked_timeout(timeout);
  require(spec.is_worker(), Status::InvalidArgument,
          "task \"" + spec.task_type + "\" " + std::to_string(spec.task_index) +
              " is not a worker: only the chief and the workers of TF_CONFIG join a multi-worker group");
  require(spec.num_workers >= 1 && spec.worker_rank < spec.num_workers, Status::InvalidArgument,
          "worker " + std::to_string(spec.worker_rank) + " of " + std::to_string(spec.num_workers) + " workers");
  if (spec.num_workers == 1)  // nothing to exchange: no module, no sockets
    return std::make_unique<WorkerGroup>(JoinKey{}, nullptr, nullptr, 0, 1, timeout, spec.worker_addresses);

  const WorkersModule& module = WorkersModule::instance();
  require(module.api() != nullptr, Status::Unsupported,
          "multi-worker training across " + std::to_string(spec.num_workers) + " processes needs the engine module: " +
              module.status());
  const bool tf_config = spec.launcher == ClusterSpec::Launcher::TfConfig;
  require(!tf_config || static_cast<int>(spec.worker_addresses.size()) == spec.num_workers, Status::InvalidArgument,
          "the cluster lists " + std::to_string(spec.worker_addresses.size()) + " addresses for " +
              std::to_string(spec.num_workers) + " workers");
  std::vector<const char*> addresses;
  for (const std::string& a : spec.worker_addresses) addresses.push_back(a.c_str());

  kx_workers_join_args args{};
  args.struct_size = sizeof args;
  args.launcher = tf_config ? KX_WORKERS_LAUNCH_TF_CONFIG : KX_WORKERS_LAUNCH_MPI;
  args.rank = spec.worker_rank;
  args.size = spec.num_workers;
  args.addresses = tf_config ? addresses.data() : nullptr;
  args.timeout_ms = timeout_ms;
  kx_workers_group* handle = nullptr;
  MessageBuffer message{};
  check(module.api()->join(&args, &handle, message.data(), message.size()), message);
  require(handle != nullptr, Status::Internal, "the multi-worker module joined no group");
  std::unique_ptr<kx_workers_group, void (*)(kx_workers_group*)> joined(handle, module.api()->leave);
  auto group = std::make_unique<WorkerGroup>(JoinKey{}, module.api(), handle, spec.worker_rank, spec.num_workers,
                                             timeout, spec.worker_addresses);
  joined.release();  // the group leaves it now
  return group;
}

std::string WorkerGroup::describe_worker(int rank) const {
  std::string address;
  if (api_) {
    std::array<char, 256> buf{};
    api_->worker_address(handle_, rank, buf.data(), buf.size());
    address = buf.data();
  } else if (rank >= 0 && rank < static_cast<int>(addresses_.size())) {
    address = addresses_[rank];
  }
  return "worker " + std::to_string(rank) + (address.empty() ? "" : " (" + address + ")");
}

void WorkerGroup::set_timeout(std::chrono::milliseconds timeout) {
  const int64_t ms = checked_timeout(timeout);
  if (api_) {
    MessageBuffer message{};
    check(api_->set_timeout(handle_, ms, message.data(), message.size()), message);
  }
  timeout_ = timeout;
}

void WorkerGroup::all_reduce(void* data, size_t count, int32_t dtype) {
  if (!api_) return;  // the sum over one worker
  require(data != nullptr || count == 0, Status::InvalidArgument, "all_reduce_sum of a null buffer");
  MessageBuffer message{};
  check(api_->all_reduce_sum(handle_, data, count, dtype, message.data(), message.size()), message);
}

void WorkerGroup::all_reduce_sum(float* data, size_t count) { all_reduce(data, count, KX_WORKERS_FLOAT32); }
void WorkerGroup::all_reduce_sum(double* data, size_t count) { all_reduce(data, count, KX_WORKERS_FLOAT64); }

void WorkerGroup::broadcast(void* data, size_t bytes, int root) {
  require(data != nullptr || bytes == 0, Status::InvalidArgument, "broadcast of a null buffer");
  if (!api_) {
    require(root == 0, Status::InvalidArgument, "broadcast root " + std::to_string(root) + " in a group of 1 worker");
    return;
  }
  // A root out of range is checked by the module after the workers compare their calls, so that
  // every worker reports it rather than the others waiting for this one.
  MessageBuffer message{};
  check(api_->broadcast(handle_, data, bytes, root, message.data(), message.size()), message);
}

void WorkerGroup::barrier() {
  if (!api_) return;
  MessageBuffer message{};
  check(api_->barrier(handle_, message.data(), message.size()), message);
}

std::vector<std::string> WorkerGroup::all_gather(const std::string& blob) {
  if (!api_) return {blob};
  std::vector<std::string> blobs;
  blobs.reserve(size_);
  const kx_workers_sink sink = [](void* user, int32_t, const void* data, size_t bytes) -> int32_t {
    try {
      static_cast<std::vector<std::string>*>(user)->emplace_back(static_cast<const char*>(data), bytes);
      return 0;
    } catch (const std::bad_alloc&) {
      return 1;
    }
  };
  MessageBuffer message{};
  check(api_->all_gather(handle_, blob.data(), blob.size(), sink, &blobs, message.data(), message.size()), message);
  return blobs;
}

}  // namespace kx::distribute
