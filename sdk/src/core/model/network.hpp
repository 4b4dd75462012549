// A model's layers as a graph, with their shapes and places in the parameter arena.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

// A contiguous run of the parameter arena.
struct ArenaSpan {
  int64_t first = 0, count = 0;
};

// The layers as a directed acyclic graph in topological order. Tensor 0 is the model input and
// tensor i + 1 the output of layer i; the last layer's output is the model's.
struct Network {
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<std::vector<int>> inputs;  // inputs[i]: the tensors layer i reads, in order
  std::vector<Shape> shapes;             // shapes[t]: of tensor t (per sample)
  // Keras's masks: mask_source[t] is the tensor whose layer computes the mask tensor t carries (its
  // scratch holds it), or -1 when t has none.
  std::vector<int> mask_source;
  std::vector<int64_t> param_offset;     // first parameter of layer i in the arena
  int64_t num_params = 0;
  std::string input_name = "input_layer";
  // The last layer's activation is folded into the loss (softmax / sigmoid + cross-entropy).
  bool fold_output_activation = false;
  // Changes whenever something a step plan depends on changes (a layer frozen or unfrozen).
  uint64_t revision = 0;
  // Activation fusion (fuse_activations): fused_activation[i] is the activation of the layer after
  // layer i (its output's only reader) that layer i applies itself. Empty: nothing fused.
  std::vector<Activation> fused_activation;
  // Padding absorption (absorb_paddings): padding_absorbed[p] says ZeroPadding2D layer p's padding is
  // added by the layer after it (its output's only reader). Empty: nothing absorbed.
  std::vector<bool> padding_absorbed;
  // Moment sharing (share_moments): moments_reader[i] is the BatchNormalization layer that alone reads
  // layer i's output and takes its batch statistics from layer i's forward; -1 for none.
  std::vector<int> moments_reader;

  int64_t input_size() const { return num_elements(shapes.front()); }
  int64_t output_size() const { return num_elements(shapes.back()); }
  // Whether the output carries a Keras mask (the loss and metrics then leave its masked steps out).
  bool output_masked() const { return mask_source.back() > 0; }
  // The steps per sample of the Keras mask the output carries ([rows, steps]: its computing layer's
  // positions, every axis but the last), 0 when it carries none.
  int64_t output_mask_steps() const {
    if (!output_masked()) return 0;
    const Shape& s = shapes[static_cast<size_t>(mask_source.back())];
    return num_elements(s) / s.back();
  }
  Activation folded_activation() const {
    return fold_output_activation ? layers.back()->output_activation() : Activation::None;
  }
  // Has each layer that can (Layer::applies_fused_activation) apply the activation layer that alone
  // reads its output (Layer::fusable_activation), unless that is the model's output layer. For float32
  // steps: mixed precision rounds the tensor between the two.
  void fuse_activations();
  Activation fused_activation_of(size_t i) const {
    return i < fused_activation.size() ? fused_activation[i] : Activation::None;
  }
  // Has each layer that can (Layer::absorbs_input_padding) add the zeros of the ZeroPadding2D layer
  // whose output it alone reads: that layer then moves nothing, and its output is not stored.
  void absorb_paddings();
  // The padding layer i adds itself: that of the absorbed ZeroPadding2D it reads, else none.
  Padding2d input_padding_of(size_t i) const {
    const int t = inputs[i].size() == 1 ? inputs[i][0] : 0;
    if (t == 0 || !is_absorbed_padding(static_cast<size_t>(t - 1))) return {};
    const LayerSpec& pad = layers[static_cast<size_t>(t - 1)]->spec();
    return {pad.pad_top, pad.pad_bottom, pad.pad_left, pad.pad_right};
  }
  // Whether layer i's output is its input's buffer (a reshape, or an absorbed activation or padding),
  // where it runs neither forward nor backward.
  bool passes_input_through(size_t i) const { return layers[i]->aliases_input() || is_absorbed(i); }
  // Whether layer i is an activation the layer before applies (it reads that layer's output alone), or
  // a padding the layer after adds.
  bool is_absorbed(size_t i) const {
    if (is_absorbed_padding(i)) return true;
    const int t = inputs[i].size() == 1 ? inputs[i][0] : 0;
    return t > 0 && fused_activation_of(static_cast<size_t>(t - 1)) != Activation::None;
  }
  bool is_absorbed_padding(size_t i) const { return i < padding_absorbed.size() && padding_absorbed[i]; }
  // Has each layer that can (Layer::writes_output_moments) write the column moments of its output for
  // the BatchNormalization layer that alone reads it, which then does not read the output for them.
  void share_moments();
  int moments_reader_of(size_t i) const { return i < moments_reader.size() ? moments_reader[i] : -1; }
  // The index of the layer called `name`, or -1.
  int layer_index(const std::string& name) const;
  // True when every layer reads just the layer before it (a Keras Sequential model).
  bool is_chain() const;
  // The parameters the optimizer trains (of trainable layers), and the state it updates by
  // subtracting the "gradient" (batch normalisation's moving statistics of trainable layers).
  std::vector<ArenaSpan> trained_spans() const;
  std::vector<ArenaSpan> state_spans() const;
  int64_t num_trainable_params() const;
  // The layers in the order Keras lists a functional model's layers (and so model.weights): by
  // decreasing depth (the longest path to the output), ties in the order a depth-first walk from the
  // output, inputs in order, first reaches them. A chain keeps its order.
  std::vector<int> keras_layer_order() const;
  // InvalidArgument unless every layer leads to the last one (the model's output).
  void require_connected() const;
};

}  // namespace kx::core
