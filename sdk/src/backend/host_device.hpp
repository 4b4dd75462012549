// KX_HOST_DEVICE marks the functions that the host and the CUDA kernels share, so that a device
// computes exactly what the CPU computes (one definition, compiled by both).
#pragma once

#if defined(__CUDACC__)
#define KX_HOST_DEVICE __host__ __device__
#else
#define KX_HOST_DEVICE
#endif
