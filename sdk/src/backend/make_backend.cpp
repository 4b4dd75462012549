#include "backend/backend.hpp"
#include "backend/cuda_module.hpp"

namespace kx::backend {

std::unique_ptr<Backend> make_backend(const Device& device, int cpu_threads, CpuGemm gemm) {
  if (device.kind == DeviceKind::Cpu) return make_cpu_backend(cpu_threads, gemm);
  return CudaModule::load().create_backend(device.index);
}

}  // namespace kx::backend
