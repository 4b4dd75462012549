// Devices a replica can run on: "cpu", "cuda:N".
#pragma once
#include <string>

namespace kx {

enum class DeviceKind { Cpu = 0, Cuda = 1 };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;
  std::string name() const { return kind == DeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
};

// Devices present on this machine of a kind (CPU: 1; CUDA: the GPUs the CUDA backend module sees,
// 0 without the module, a driver or a GPU; CUDA_VISIBLE_DEVICES is honoured).
int device_count(DeviceKind kind);
// What kx found for a kind of device, for people: the cores; the CUDA module's path and devices, or
// why there are none.
std::string device_status(DeviceKind kind);

// Parses "cpu" or "cuda:N"; throws InvalidArgument for anything else, Device if it is not present.
Device parse_device(const std::string& name);

}  // namespace kx
