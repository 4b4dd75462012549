// KX_HOST_DEVICE marks the functions that the host and the CUDA kernels share: one definition,
// compiled by both, so a device computes the same formula in the same order as the CPU. The results are
// the same bits where the formula uses integer operations and +, -, *, / rounded one at a time
// (rounded_math.hpp; nvcc would otherwise fuse a * b + c). Where it calls exp, log or tanh, each
// platform's library rounds its last ulp its own way. docs/design.md lists which kernels are bitwise.
#pragma once

#if defined(__CUDACC__)
#define KX_HOST_DEVICE __host__ __device__
#else
#define KX_HOST_DEVICE
#endif
