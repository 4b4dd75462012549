#include "backend/backend.hpp"
#include "backend/cuda_module.hpp"

namespace kx::backend {

std::unique_ptr<Backend> make_backend(const Device& device, const BackendOptions& options) {
  if (device.kind == DeviceKind::Cpu)
    return make_cpu_backend(options.cpu_threads, options.cpu_gemm, options.cpu_bf16_gemm);
  return CudaModule::load().create_backend(device.index, options);
}

}  // namespace kx::backend
