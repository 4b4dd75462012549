// AArch64 NEON (ASIMD) register-tile kernel for the blocked GEMM driver, chosen over the portable loops
// when the kernel reports ASIMD (every AArch64 Linux CPU does; the check costs nothing). The driver's
// 8 x 32 tile needs 64 vectors, more than the 32 NEON registers: it is computed as column chunks of
// up to 12 (8 rows x 3 vectors = 24 accumulators, B's 3 vectors and A's broadcasts in the rest); the
// last columns that do not fill a vector go to the portable kernel.
#include "backend/cpu/gemm.hpp"
#include "backend/rounding_math.hpp"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>

namespace kx::backend::cpu {
namespace {

constexpr int kLanes = 4;

// C[MR rows, NV * 4 columns] of the tile, starting at its column `col`.
template <int MR, int NV>
void chunk_kernel(const Tile& t, int col) {
  float32x4_t acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = vdupq_n_f32(0.0f);

  const float* a = t.A;
  const float* b = t.B + col;
  for (int64_t k = 0; k < t.K; ++k, a += t.csa, b += t.ldb) {
    float32x4_t bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = vld1q_f32(b + kLanes * v);
    for (int r = 0; r < MR; ++r) {
      const float ar = a[r * t.rsa];
      for (int v = 0; v < NV; ++v) acc[r][v] = vfmaq_n_f32(acc[r][v], bv[v], ar);
    }
  }

  // As the AVX-512 kernel: (sum + bias), then + beta * C fused, then ReLU, then the rounding.
  float32x4_t bias[NV];
  for (int v = 0; v < NV; ++v) bias[v] = t.bias ? vld1q_f32(t.bias + col + kLanes * v) : vdupq_n_f32(0.0f);
  const float32x4_t beta = vdupq_n_f32(t.beta);
  const float32x4_t zero = vdupq_n_f32(0.0f);
  for (int r = 0; r < MR; ++r) {
    float* c = t.C + r * t.ldc + col;
    for (int v = 0; v < NV; ++v) {
      float32x4_t x = vaddq_f32(acc[r][v], bias[v]);
      if (t.beta != 0.0f) x = vfmaq_f32(x, beta, vld1q_f32(c + kLanes * v));
      if (t.relu) x = vmaxq_f32(x, zero);
      vst1q_f32(c + kLanes * v, x);
      if (t.rounding != Rounding::None)  // a mixed-precision layer's output is stored as a 16-bit value
        for (int l = 0; l < kLanes; ++l) c[kLanes * v + l] = round_value(c[kLanes * v + l], t.rounding);
    }
  }
}

template <int MR>
void tile_rows(const Tile& t) {
  int col = 0;
  for (; t.cols - col >= 3 * kLanes; col += 3 * kLanes) chunk_kernel<MR, 3>(t, col);
  if (t.cols - col >= 2 * kLanes) {
    chunk_kernel<MR, 2>(t, col);
    col += 2 * kLanes;
  }
  if (t.cols - col >= kLanes) {
    chunk_kernel<MR, 1>(t, col);
    col += kLanes;
  }
  if (col < t.cols) {  // fewer columns than a vector: the portable loops, on those columns alone
    Tile rest = t;
    rest.B += col;
    rest.C += col;
    rest.cols = t.cols - col;
    if (t.bias) rest.bias += col;
    tile_portable(rest);
  }
}

void tile_any(const Tile& t) {
  switch (t.rows) {
    case 8: return tile_rows<8>(t);
    case 7: return tile_rows<7>(t);
    case 6: return tile_rows<6>(t);
    case 5: return tile_rows<5>(t);
    case 4: return tile_rows<4>(t);
    case 3: return tile_rows<3>(t);
    case 2: return tile_rows<2>(t);
    default: return tile_rows<1>(t);
  }
}

}  // namespace

TileKernel tile_neon() { return (getauxval(AT_HWCAP) & HWCAP_ASIMD) ? &tile_any : nullptr; }

}  // namespace kx::backend::cpu

#else

namespace kx::backend::cpu {
TileKernel tile_neon() { return nullptr; }
}  // namespace kx::backend::cpu

#endif
