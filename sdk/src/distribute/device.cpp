// Device discovery and device names.
#include "kx/device.hpp"

#include <cstdlib>

#include "kx/error.hpp"

namespace kx {

int device_count(DeviceKind kind) {
  // The CUDA backend module is not part of this version: no CUDA device is ever reported.
  return kind == DeviceKind::Cpu ? 1 : 0;
}

Device parse_device(const std::string& name) {
  if (name == "cpu" || name == "cpu:0") return Device{DeviceKind::Cpu, 0};
  if (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() <= 9) {
    int index = 0;
    for (size_t i = 5; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') fail(Status::InvalidArgument, "bad device name \"" + name + "\"");
      index = index * 10 + (name[i] - '0');
    }
    if (index >= device_count(DeviceKind::Cuda))
      fail(Status::Device, "device \"" + name + "\" is not present (" + std::to_string(device_count(DeviceKind::Cuda)) +
                               " CUDA devices found)");
    return Device{DeviceKind::Cuda, index};
  }
  fail(Status::InvalidArgument, "unknown device name \"" + name + "\" (expected \"cpu\" or \"cuda:N\")");
}

}  // namespace kx
