// Whether a CUDA driver and a GPU are present, asked of the driver itself before libkx loads its CUDA
// module: loading the module (a CUDA runtime and cuBLASLt) costs hundreds of milliseconds and some
// 200 MB, which a process on a machine without a GPU should not pay for nothing.
#pragma once
#include <string>

namespace kx::backend {

struct DriverProbe {
  int devices = 0;  // GPUs the driver reports; 0 without a driver or a GPU
  std::string why;  // when devices == 0: what is missing, for people
};

// The driver library's default name (the one the CUDA runtime itself opens).
inline constexpr const char kCudaDriverLibrary[] = "libcuda.so.1";

// Opens `library` and calls its cuInit(0) and cuDeviceGetCount through dlsym: libkx never links the
// driver. A driver that loaded stays loaded (cuInit may have started its threads). Never throws.
DriverProbe probe_cuda_driver(const char* library = kCudaDriverLibrary);

}  // namespace kx::backend
