// Bilinear resizing as tf.image.resize(method="bilinear", antialias=False) does it (what Keras's
// image_dataset_from_directory uses): half-pixel centers, source coordinate
// (dst + 0.5) * in / out - 0.5, neighbours clamped to the edge, interpolated in float32.
#pragma once
#include <cstdint>

#include "data/image_codec.hpp"

namespace kx::data {

// img resized to out_h x out_w (same channels), each value then multiplied by `scale` (1/255: [0, 1]).
// The same size is an exact copy (times scale).
void resize_bilinear(const Image& img, int64_t out_h, int64_t out_w, float scale, float* out);

}  // namespace kx::data
