// Keras 3's Add of two inputs when a Keras mask reaches it (base_merge's masked merge): at a step where
// one input is masked, the other input's value stands in for it before the sum. So the sum is
// a0 * x0 + a1 * x1 per step, with (a0, a1) = (1, 1) where both inputs count, (2, 0) where only x0
// counts or neither does, (0, 2) where only x1 counts; an input without a mask counts everywhere. The
// output's mask is the OR of the two masks when both have one, and none otherwise.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"

namespace kx::core {

struct MaskedAdd {
  int64_t steps = 0, features = 0;  // a sample is [steps, features] (features: the rest of its axes)

  // Floats of workspace forward and backward need for `rows` samples.
  int64_t workspace_floats(int64_t rows) const;
  // y = a0 * x0 + a1 * x1; m0, m1 the masks ([rows, steps], 1 or 0; null for none, not both).
  void forward(backend::Backend& be, int64_t rows, const float* m0, const float* m1, const float* x0,
               const float* x1, float* y, float* workspace) const;
  // dx0 = a0 * dy, dx1 = a1 * dy (either may be null: nothing needs it).
  void backward(backend::Backend& be, int64_t rows, const float* m0, const float* m1, const float* dy, float* dx0,
                float* dx1, float* workspace) const;
  // The output's mask, m0 OR m1 ([rows, steps]), both given.
  void output_mask(backend::Backend& be, int64_t rows, const float* m0, const float* m1, float* mask,
                   float* workspace) const;

 private:
  // a0 and a1, [rows, steps] each, from the masks.
  void coefficients(backend::Backend& be, int64_t rows, const float* m0, const float* m1, float* a0, float* a1) const;
  // out [rows, steps, features] = a [rows, steps] (broadcast over features) * x.
  void scale_steps(backend::Backend& be, int64_t rows, const float* a, const float* x, float* out) const;
};

}  // namespace kx::core
