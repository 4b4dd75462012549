#include "kx/strategy.hpp"

#include <cstdlib>
#include <cstring>

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

void Strategy::set_num_threads(int n) {
  require(n >= 0, Status::InvalidArgument, "thread count must be >= 0 (0 = every core), got " + std::to_string(n));
  num_threads_ = n;
}

namespace {
// A KX_* debugging switch of the environment, or "" when it is not set.
const char* env_setting(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

StepGraphs Strategy::effective_step_graphs() const {
  const char* v = env_setting("KX_STEP_GRAPHS");
  if (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0) return StepGraphs::Off;
  if (std::strcmp(v, "emulate") == 0) return StepGraphs::Emulate;
  if (std::strcmp(v, "1") == 0 || std::strcmp(v, "on") == 0) return StepGraphs::Auto;
  return step_graphs_;
}

DataStreaming Strategy::effective_data_streaming() const {
  if (std::strcmp(env_setting("KX_DATA_STREAMING"), "always") == 0) return DataStreaming::Always;
  return data_streaming_;
}

bool Strategy::effective_cudnn() const {
  if (std::strcmp(env_setting("KX_CUDNN"), "0") == 0) return false;
  return cudnn_;
}

}  // namespace kx
