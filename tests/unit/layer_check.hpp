// The check every layer's unit test makes: forward against a float64 reference, backward against
// finite differences of that reference, one layer at a time on the CPU backend.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "kx/model.hpp"
#include "kx/tensor.hpp"
#include "reference.hpp"

namespace kx::test {

// A float64 model of a layer: the output for inputs xs and parameters w.
using Reference = std::function<Vec(const std::vector<Vec>& xs, const Vec& w)>;

struct Checked {
  std::vector<float> y;           // the layer's forward output
  std::vector<FloatBuffer> dxs;   // its input gradients
  FloatBuffer dw;                 // its parameter gradients
  FloatBuffer scratch;
};

// Runs the layer forward (training) and backward with a random dy, and checks the output against
// ref and every gradient against finite differences of dot(dy, ref). Parameters are w (their count
// must be the layer's); inputs are random. mask, when not empty, is the input's sequence mask
// (LayerContext::mask, [rows, steps]). given_inputs[k], when there and not empty, is input k's values
// instead of random ones. input_masks[k], when there and not empty, is input k's mask (inputs with
// equal masks are told they share one, Layer::take_input_masks). Returns the buffers for further checks.
Checked check_layer(core::Layer& layer, const std::vector<Shape>& in_shapes, int64_t rows, const std::vector<float>& w,
                    const Reference& ref, double tol = 1e-4, bool check_w = true, const std::vector<float>& mask = {},
                    const std::vector<std::vector<float>>& given_inputs = {},
                    const std::vector<std::vector<float>>& input_masks = {});

// A spec of this kind and name, everything else at its default.
LayerSpec spec_of(LayerKind kind, const char* name);

// The weights of a Sequential model of these layers (Keras configs as JSON) on `replicas` CPU replicas
// after 5 steps on the same 32 random samples with labels 0..2 (compile seed 7): what a layer's
// "two replicas train as one" test compares.
std::vector<float> weights_after_training(const Shape& input, const std::vector<std::string>& layers, int replicas);

// A compiled model of one layer (its Keras config as JSON) on inputs of `shape` named "x", one CPU
// replica, compile seed `seed`: what the initializer tests draw weights from.
Model one_layer_model(const Shape& shape, const std::string& layer, uint64_t seed = 1);

}  // namespace kx::test
