// Device discovery and device names.
#include "kx/device.hpp"

#include <cstdlib>

#include "backend/cuda_module.hpp"
#include "kx/error.hpp"

namespace kx {

int device_count(DeviceKind kind) {
  return kind == DeviceKind::Cpu ? 1 : backend::CudaModule::load().device_count();
}

std::string device_status(DeviceKind kind) {
  if (kind == DeviceKind::Cpu) return "cpu: " + std::to_string(backend::cpu_core_count()) + " cores";
  const backend::CudaModule& m = backend::CudaModule::load();
  std::string s = m.status();
  for (int i = 0; i < m.device_count(); ++i) s += "\ncuda:" + std::to_string(i) + ": " + m.describe_device(i);
  return s;
}

Device parse_device(const std::string& name) {
  if (name == "cpu" || name == "cpu:0") return Device{DeviceKind::Cpu, 0};
  if (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() <= 9) {
    int index = 0;
    for (size_t i = 5; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') fail(Status::InvalidArgument, "bad device name \"" + name + "\"");
      index = index * 10 + (name[i] - '0');
    }
    const backend::CudaModule& m = backend::CudaModule::load();
    if (index >= m.device_count())
      fail(Status::Device, "device \"" + name + "\" is not present (" + m.status() + ")");
    return Device{DeviceKind::Cuda, index};
  }
  fail(Status::InvalidArgument, "unknown device name \"" + name + "\" (expected \"cpu\" or \"cuda:N\")");
}

}  // namespace kx
