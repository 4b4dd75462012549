// GlobalMaxPooling2D, as keras.layers.GlobalMaxPooling2D: the maximum of each channel over height and
// width, (h, w, c) -> (c), or (1, 1, c) with keepdims. Max pooling with one window the size of the
// sample, so the gradient goes to the first maximum as MaxPooling2D's does.
#include "core/layers/global_pooling2d.hpp"
#include "core/layers/layer_json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class GlobalMaxPooling2dLayer final : public GlobalPooling2dLayer {
 public:
  GlobalMaxPooling2dLayer(const LayerSpec& spec, bool keepdims) : GlobalPooling2dLayer(spec, keepdims, "GlobalMaxPool") {}
  bool rounds_output(bool) const override { return true; }       // the maximum of 16-bit values is one
  bool rounds_input_grads(bool) const override { return true; }  // dy's values and zeros

  void forward(const LayerContext& c) const override { c.be->max_pool_forward(g_, c.rows, c.x, c.y); }
  void backward(const LayerContext& c) const override {
    if (c.dx) c.be->max_pool_backward(g_, c.rows, c.x, c.y, c.dy, c.dx);
  }
};

}  // namespace

std::unique_ptr<Layer> make_global_max_pooling2d_layer(const LayerSpec& spec) {
  return std::make_unique<GlobalMaxPooling2dLayer>(spec, global_pooling_keepdims(spec, "GlobalMaxPooling2D"));
}

}  // namespace kx::core
