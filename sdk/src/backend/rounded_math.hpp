// Float operations rounded one at a time, for the formulas the CPU and the CUDA kernels share
// (KX_HOST_DEVICE). nvcc fuses `a * b + c` into one multiply-add by default, which rounds once where the
// CPU rounds twice; the __f*_rn intrinsics are never fused. The host side is the plain operator: libkx
// is built with -ffp-contract=off, so GCC does not fuse it either (on aarch64 it would by default).
#pragma once

#include <cmath>

#include "backend/host_device.hpp"

namespace kx::backend {

KX_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KX_HOST_DEVICE inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
KX_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
KX_HOST_DEVICE inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
KX_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace kx::backend
