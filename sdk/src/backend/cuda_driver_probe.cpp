#include "backend/cuda_driver_probe.hpp"

#include <dlfcn.h>

#include "io/shared_library.hpp"

namespace kx::backend {
namespace {

// The driver API's own signatures (cuda.h), declared here so that libkx needs no CUDA header.
using CuResult = int;
using CuInit = CuResult (*)(unsigned int flags);
using CuDeviceGetCount = CuResult (*)(int* count);
using CuGetErrorString = CuResult (*)(CuResult error, const char** text);
constexpr CuResult kCudaSuccess = 0;

std::string describe(const io::SharedLibrary& driver, CuResult r) {
  const char* text = nullptr;
  const auto name = reinterpret_cast<CuGetErrorString>(driver.symbol("cuGetErrorString"));
  if (name && name(r, &text) == kCudaSuccess && text)
    return std::string(text) + " (CUresult " + std::to_string(r) + ")";
  return "CUresult " + std::to_string(r);
}

}  // namespace

DriverProbe probe_cuda_driver(const char* library) {
  DriverProbe probe;
  // RTLD_NODELETE: once cuInit has run, unloading the driver under its own threads would crash.
  const io::SharedLibrary driver(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!driver.opened()) {
    probe.why = "no CUDA driver (" + driver.error() + ")";
    return probe;
  }
  const auto init = reinterpret_cast<CuInit>(driver.symbol("cuInit"));
  const auto count = reinterpret_cast<CuDeviceGetCount>(driver.symbol("cuDeviceGetCount"));
  if (!init || !count) {
    probe.why = std::string(library) + " is not a CUDA driver (no cuInit or cuDeviceGetCount)";
  } else if (const CuResult r = init(0); r != kCudaSuccess) {
    probe.why = "the CUDA driver did not start: " + describe(driver, r);
  } else if (int n = 0; (count(&n) != kCudaSuccess) || n <= 0) {
    probe.why = "the CUDA driver reports no GPU";
  } else {
    probe.devices = n;
  }
  return probe;  // closing the driver leaves it mapped (RTLD_NODELETE)
}

}  // namespace kx::backend
