// Errors inside the CUDA module: raised through libkx (HostServices) as kx::Error with a status.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "backend/module_api.hpp"
#include "kx/error.hpp"

namespace kx::backend::cuda {

[[noreturn]] inline void raise(const HostServices& host, Status status, const std::string& message) {
  host.raise(static_cast<int>(status), message.c_str());
  __builtin_unreachable();  // raise throws
}

inline void check(const HostServices& host, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const Status s = e == cudaErrorMemoryAllocation ? Status::OutOfMemory : Status::Device;
  raise(host, s, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline void check(const HostServices& host, cublasStatus_t e, const char* what) {
  if (e == CUBLAS_STATUS_SUCCESS) return;
  const Status s = e == CUBLAS_STATUS_ALLOC_FAILED ? Status::OutOfMemory
                   : e == CUBLAS_STATUS_NOT_SUPPORTED ? Status::Unsupported
                                                      : Status::Device;
  raise(host, s, std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(e)));
}

}  // namespace kx::backend::cuda
