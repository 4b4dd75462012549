// One axis of a (possibly dilated) convolution, as TensorFlow lays it out: what Conv2D,
// DepthwiseConv2D and SeparableConv2D share.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "core/checked_size.hpp"
#include "kx/error.hpp"
#include "kx/layer.hpp"

namespace kx::core {

// The output length and the zeros before the input of a kernel of k taps `dilation` apart ("same"
// puts the odd one after, as TensorFlow does). InvalidArgument when a "valid" kernel spans more than
// the input.
inline std::pair<int64_t, int64_t> conv_axis(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding padding,
                                             const std::string& what) {
  const int64_t span = checked_product({k - 1, dilation}, what + "'s dilated kernel") + 1;
  if (padding == Padding::Same) {
    const int64_t out = (in + stride - 1) / stride;
    return {out, std::max<int64_t>((out - 1) * stride + span - in, 0) / 2};
  }
  require(in >= span, Status::InvalidArgument,
          what + ": kernel spanning " + std::to_string(span) + " is larger than its input " + std::to_string(in) +
              " with \"valid\" padding");
  return {(in - span) / stride + 1, 0};
}

// Keras refuses a convolution both strided and dilated.
inline void require_stride_or_dilation(int64_t stride_h, int64_t stride_w, int64_t dilation_h, int64_t dilation_w,
                                       const std::string& what) {
  require(std::max(stride_h, stride_w) == 1 || std::max(dilation_h, dilation_w) == 1, Status::InvalidArgument,
          what + ": strides > 1 are incompatible with dilation_rate > 1");
}

}  // namespace kx::core
