// Mixed precision's element-wise kernels: rounding spans of float32 values to a 16-bit type, in place
// or not, and the finiteness test of loss scaling.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cpu {

// y[i] = x[i] rounded to r, for i < n; y may alias x.
void round_span(Rounding r, int64_t n, const float* x, float* y);
// True when no value of x[0, n) is infinite or NaN (a loss-scaled gradient that did not overflow).
bool all_finite(int64_t n, const float* x);

}  // namespace kx::backend::cpu
