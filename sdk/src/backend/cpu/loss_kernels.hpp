// The CPU's loss: every row on one thread, in order, so that the sums repeat bitwise. The work is
// O(rows * cols), small next to the GEMMs that produced the outputs.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::backend::cpu {

// As Backend::loss: the sums over these rows (added to the backend's running sums by the caller).
LossSums loss_rows(const LossSpec& spec, int64_t rows, int64_t cols, const float* out, const float* y, int64_t y_cols,
                   const float* weights, float grad_scale, float* dout);

}  // namespace kx::backend::cpu
