// Launch shapes shared by the CUDA kernels: 256-thread blocks and grid-stride loops.
#pragma once
#include <cstdint>

namespace kx::backend::cuda {

inline constexpr int kThreads = 256;

// Blocks for n elements, capped; grid-stride loops cover the rest.
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

}  // namespace kx::backend::cuda

#define KX_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The same in index type I: 32-bit where every index of a launch fits (blocks_for's cap keeps a step
// below 2^28), as 64-bit division costs several times more.
#define KX_GRID_STRIDE_OF(I, i, n)                                                                    \
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < (n);                           \
       i += static_cast<I>(gridDim.x * blockDim.x))
