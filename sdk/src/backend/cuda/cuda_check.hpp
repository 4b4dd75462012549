// Errors inside the CUDA module: thrown as kx::Error with a status, which the module's C table
// (module/module_export.hpp) turns into a status code and message for libkx.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "kx/error.hpp"

namespace kx::backend::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const Status s = e == cudaErrorMemoryAllocation ? Status::OutOfMemory : Status::Device;
  fail(s, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline void check(cublasStatus_t e, const char* what) {
  if (e == CUBLAS_STATUS_SUCCESS) return;
  const Status s = e == CUBLAS_STATUS_ALLOC_FAILED ? Status::OutOfMemory
                   : e == CUBLAS_STATUS_NOT_SUPPORTED ? Status::Unsupported
                                                      : Status::Device;
  fail(s, std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(e)));
}

}  // namespace kx::backend::cuda
