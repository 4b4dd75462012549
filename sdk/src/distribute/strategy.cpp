#include "kx/strategy.hpp"

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

}  // namespace kx
