#include "kx/strategy.hpp"

#include <optional>
#include <string_view>

#include "config/env_switches.hpp"
#include "core/train/parameter_server/ps_cluster.hpp"
#include "core/train/parameter_server/ps_server.hpp"
#include "distribute/cluster_spec.hpp"
#include "distribute/multi_worker_collective.hpp"
#include "distribute/worker_group.hpp"
#include "kx/error.hpp"

namespace kx {

Strategy Strategy::default_strategy() {
  if (device_count(DeviceKind::Cuda) > 0) return Strategy({Device{DeviceKind::Cuda, 0}});
  return Strategy({Device{DeviceKind::Cpu, 0}});
}

Strategy Strategy::mirrored(const std::vector<std::string>& names) {
  std::vector<Device> devices;
  if (names.empty()) {
    for (int i = 0; i < device_count(DeviceKind::Cuda); ++i) devices.push_back(Device{DeviceKind::Cuda, i});
    if (devices.empty()) devices.push_back(Device{DeviceKind::Cpu, 0});
  } else {
    for (const auto& n : names) devices.push_back(parse_device(n));
  }
  for (const Device& d : devices)
    require(d.kind == devices.front().kind, Status::InvalidArgument,
            "a mirrored strategy cannot mix CPU and GPU replicas (" + devices.front().name() + " and " +
                d.name() + ")");
  return Strategy(std::move(devices));
}

Strategy Strategy::multi_worker(const std::vector<std::string>& local_devices) {
  Strategy s = mirrored(local_devices);
  const distribute::ClusterSpec spec = distribute::ClusterSpec::from_environment();
  require(spec.is_worker(), Status::InvalidArgument,
          "this task is a \"" + spec.task_type + "\" in the cluster, not a worker: a multi-worker strategy needs a "
          "worker (or the chief)");
  s.workers_ = distribute::WorkerGroup::join(spec);
  s.collective_factory_ = distribute::multi_worker_collective_factory(s.workers_);
  return s;
}

Strategy Strategy::parameter_server(const std::vector<std::string>& local_devices) {
  Strategy s = mirrored(local_devices);
  s.ps_ = std::make_shared<distribute::PsCluster>(distribute::ClusterSpec::from_environment());
  return s;
}

void Strategy::serve() {
  require(ps_ && ps_->role() == distribute::PsCluster::Role::Ps, Status::InvalidArgument,
          "serve is for the ps tasks of a parameter-server strategy; the chief and the workers call fit");
  distribute::serve_parameters(*ps_, num_threads_);
}

void Strategy::set_staleness(int steps) {
  require(ps_ != nullptr, Status::InvalidArgument, "staleness applies to a parameter-server strategy only");
  ps_->set_staleness(steps);
}

int Strategy::parameter_server_workers() const { return ps_ ? ps_->num_workers() : 0; }
int Strategy::parameter_server_rank() const { return ps_ ? ps_->rank() : -1; }

int Strategy::num_workers() const { return workers_ ? workers_->size() : 1; }
int Strategy::worker_index() const { return workers_ ? workers_->rank() : 0; }

void Strategy::set_timeout(int milliseconds) {
  require(milliseconds > 0, Status::InvalidArgument,
          "the timeout must be positive, got " + std::to_string(milliseconds) + " ms");
  if (workers_) workers_->set_timeout(std::chrono::milliseconds(milliseconds));
  if (ps_) ps_->peers().set_timeout(std::chrono::milliseconds(milliseconds));
}

void Strategy::set_num_threads(int n) {
  require(n >= 0, Status::InvalidArgument, "thread count must be >= 0 (0 = every core), got " + std::to_string(n));
  num_threads_ = n;
}

// The environment's KX_* switches override the settings, for debugging a program without rebuilding it
// (config/env_switches.cpp: a value a switch does not take is an error).
StepGraphs Strategy::effective_step_graphs() const {
  const std::optional<std::string_view> v = config::choice("KX_STEP_GRAPHS");
  if (!v) return step_graphs_;
  if (*v == "emulate") return StepGraphs::Emulate;
  return *v == "0" || *v == "off" ? StepGraphs::Off : StepGraphs::Auto;
}

DataStreaming Strategy::effective_data_streaming() const {
  return config::choice("KX_DATA_STREAMING") ? DataStreaming::Always : data_streaming_;  // its one value: always
}

bool Strategy::effective_cudnn() const { return config::flag("KX_CUDNN").value_or(cudnn_); }

}  // namespace kx
