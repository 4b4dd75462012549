#include "core/layers/windowed_conv.hpp"

#include "core/checked_size.hpp"
#include "core/layers/layer_activation.hpp"

namespace kx::core {

using backend::Epilogue;
using backend::Trans;

bool WindowedConv::native(const backend::Backend& be) const {
  return be.supports({backend::Op::conv2d_forward, g_}) && be.supports({backend::Op::conv2d_backward, g_});
}

int64_t WindowedConv::workspace_floats_on(const backend::Backend& be, int64_t rows, const std::string& what) const {
  if (pointwise() || native(be)) return 0;
  return checked_product({rows, g_.out_h, g_.out_w, g_.patch()}, what + "'s columns");
}

void WindowedConv::forward(const LayerContext& c) const {
  const int64_t F = filters_, positions = c.rows * g_.out_h * g_.out_w, patch = g_.patch();
  const Activation act = c.fold_activation ? Activation::None : activation_;
  const Activation fused = act == Activation::Relu ? Activation::Relu : Activation::None;
  float* z = linear_output(c, act);
  if (native(*c.be)) {
    // A native convolution (cuDNN) stores float32 sums: the layer rounds them itself.
    c.be->conv2d_forward(g_, F, c.rows, c.x, c.w, bias(c.w), fused, z);
    if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, positions * F, z, z);
    if (act != fused) apply_activation(c, act, positions, F);
    return write_output_moments(c, positions, F);
  }
  const float* columns = c.x;
  if (!pointwise()) {
    c.be->im2col(g_, c.rows, c.x, c.workspace);
    columns = c.workspace;
  }
  Epilogue ep{bias(c.w), fused};
  ep.rounding = c.rounding;
  if (c.output_moments && act == fused && c.rounding == backend::Rounding::None)  // the GEMM wrote y
    return c.be->gemm_column_moments(positions, F, patch, columns, patch, c.w, F, z, F, ep, c.output_moments,
                                     c.output_moments + F);
  c.be->gemm(Trans::No, Trans::No, positions, F, patch, columns, patch, c.w, F, 0.0f, z, F, ep);
  if (act != fused) apply_activation(c, act, positions, F);
  write_output_moments(c, positions, F);
}

void WindowedConv::backward(const LayerContext& c) const {
  const int64_t F = filters_, positions = c.rows * g_.out_h * g_.out_w, patch = g_.patch();
  activation_gradient(c, activation_, positions, F);
  if (native(*c.be)) {
    c.be->conv2d_backward(g_, F, c.rows, c.x, c.w, c.dy, c.dx, c.dw, c.dw ? bias(c.dw) : nullptr);
    if (c.dw && c.rounding != backend::Rounding::None)
      c.be->round_to(c.rounding, patch * F + (use_bias_ ? F : 0), c.dw, c.dw);
    return;
  }
  const float* columns = c.x;
  if (c.dw && !pointwise()) {
    c.be->im2col(g_, c.rows, c.x, c.workspace);  // what forward multiplied
    columns = c.workspace;
  }
  if (c.dw) {
    Epilogue with_bias_grad;
    with_bias_grad.bias_grad = bias(c.dw);  // fused into the GEMM where the backend can
    with_bias_grad.rounding = c.rounding;
    c.be->gemm(Trans::Yes, Trans::No, patch, F, positions, columns, patch, c.dy, F, 0.0f, c.dw, F, with_bias_grad);
  }
  if (!c.dx) return;
  Epilogue dx_ep;
  dx_ep.rounding = c.rounding;
  if (pointwise()) {
    c.be->gemm(Trans::No, Trans::Yes, positions, patch, F, c.dy, F, c.w, F, 0.0f, c.dx, patch, dx_ep);
    return;
  }
  // The columns are no longer needed: their gradient takes their place, then folds back onto dx
  // (which the plan rounds: Keras rounds the whole input gradient once, so these stay float32).
  dx_ep.keep_float32 = true;
  c.be->gemm(Trans::No, Trans::Yes, positions, patch, F, c.dy, F, c.w, F, 0.0f, c.workspace, patch, dx_ep);
  c.be->col2im(g_, c.rows, c.workspace, c.dx);
}

}  // namespace kx::core
