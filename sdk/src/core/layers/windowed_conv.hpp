// A dense convolution over a Window2d, y = act(conv(x, K) + b) with K [k_h, k_w, channels, filters]
// (Keras's layout, im2col's patch order): the backend's native convolution where it has one for the
// geometry, else im2col and GEMM (no columns for a 1x1 kernel with stride 1). What Conv2D and Conv1D
// (a window one row high) share.
#pragma once
#include <cstdint>

#include "core/layers/layer.hpp"

namespace kx::core {

class WindowedConv {
 public:
  WindowedConv() = default;
  WindowedConv(const backend::Window2d& g, int64_t filters, bool use_bias, Activation activation)
      : g_(g), filters_(filters), use_bias_(use_bias), activation_(activation) {}

  const backend::Window2d& window() const { return g_; }
  // The columns, made again in backward rather than kept.
  int64_t workspace_floats_on(const backend::Backend& be, int64_t rows, const std::string& what) const;
  // The GEMM rounds y (a ReLU of rounded values is rounded); another activation comes after it.
  bool rounds_output(bool fold) const { return fold || piecewise_linear(activation_); }

  void forward(const LayerContext& c) const;
  void backward(const LayerContext& c) const;

 private:
  // The bias (or its gradient) after the kernel in a slice of parameters; null without one.
  template <class T>
  T* bias(T* params) const {
    return use_bias_ ? params + g_.patch() * filters_ : nullptr;
  }
  bool pointwise() const {
    return g_.k_h == 1 && g_.k_w == 1 && g_.stride_h == 1 && g_.stride_w == 1 && g_.pad_top == 0 && g_.pad_left == 0;
  }
  // Whether be runs this convolution natively both ways (the im2col path's columns serve both, so the
  // two go together).
  bool native(const backend::Backend& be) const;

  backend::Window2d g_;
  int64_t filters_ = 0;
  bool use_bias_ = true;
  Activation activation_ = Activation::None;
};

}  // namespace kx::core
