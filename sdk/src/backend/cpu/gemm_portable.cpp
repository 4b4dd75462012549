// Portable register-tile kernel: plain loops the compiler vectorises (SSE, NEON on a Jetson).
#include <algorithm>

#include "backend/cpu/gemm.hpp"
#include "backend/rounding_math.hpp"

namespace kx::backend::cpu {

void tile_portable(const Tile& t) {
  float acc[kTileRows][kTileCols] = {};
  for (int64_t k = 0; k < t.K; ++k) {
    const float* b = t.B + k * t.ldb;
    for (int r = 0; r < t.rows; ++r) {
      const float a = t.A[r * t.rsa + k * t.csa];
      for (int c = 0; c < t.cols; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < t.rows; ++r) {
    float* c = t.C + r * t.ldc;
    for (int j = 0; j < t.cols; ++j) {
      float v = acc[r][j];
      if (t.beta != 0.0f) v += t.beta * c[j];
      if (t.bias) v += t.bias[j];
      if (t.relu) v = std::max(v, 0.0f);
      c[j] = round_value(v, t.rounding);
    }
  }
}

}  // namespace kx::backend::cpu
