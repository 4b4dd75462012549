// Formulas of the activations that the CPU and the CUDA kernels share (KX_HOST_DEVICE), so that both
// treat NaN as Keras does: relu(NaN) is NaN (TensorFlow's Relu), where max(0, x) in the form fmaxf or
// a vector max with 0 second would make it 0 and hide a NaN input from the loss and TerminateOnNaN.
#pragma once

#include "backend/host_device.hpp"

namespace kx::backend {

KX_HOST_DEVICE inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

}  // namespace kx::backend
