// Where a model's weights and optimizer state are in Keras's HDF5 weight files: Keras 3's layout
// (.weights.h5 and a .keras file's model.weights.h5: layers/<class stem>[_n]/vars/<i>, each vars
// group naming its layer since Keras 3.6) and the legacy one (.h5 from model.save or save_weights,
// Keras 2 and 3: a group per layer name whose attribute weight_names lists its datasets).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "io/hdf5_tree.hpp"
#include "kx/model.hpp"

namespace kx::core {

// One layer of a model in Keras's order (a functional model's InputLayer included: Keras counts it
// when it names groups).
struct KerasLayerWeights {
  std::string name;
  std::string stem;                  // Keras's snake-case class name: "dense", "batch_normalization"
  std::vector<WeightInfo> weights;   // in Keras's order
  bool trainable = true;             // the layer's flag: a frozen layer's weights have no optimizer slots
  // Per weight, where Keras 3's files keep it under the layer's group: "vars/<i>", or a sublayer's
  // ("query_dense/vars/0"); empty: vars/<i> for every weight.
  std::vector<std::string> file_paths{};
  size_t keras_only_counters = 0;    // int64 scalars Keras keeps after the weights (Layer::keras_only_counters)
};

// Weight i's place under its layer's group in Keras 3's files.
inline std::string keras3_weight_path(const KerasLayerWeights& l, size_t i) {
  return i < l.file_paths.size() && !l.file_paths[i].empty() ? l.file_paths[i] : "vars/" + std::to_string(i);
}

// The dataset of each weight, layer by layer; "" where the file has none. Legacy files are matched
// by layer name; Keras 3 files by the layer name their vars groups carry, else (before 3.6) by the
// group Keras derives from the class (dense, dense_1, ...), as Keras itself loads them.
std::vector<std::vector<std::string>> keras_weight_paths(const io::Hdf5Tree& f,
                                                         const std::vector<KerasLayerWeights>& layers);

// The group Keras 3 keeps each layer's variables in: layers/<stem>, layers/<stem>_1, ...
std::vector<std::string> keras3_layer_groups(const std::vector<KerasLayerWeights>& layers);

// The optimizer's variables in a Keras file: its step count, its learning rate (when the file keeps
// it) and `slots` datasets per trained weight (Adam: first and second moment), in the order of the
// model's trained weights. nullopt when the file has no optimizer state, or state of another
// optimizer or model (another count of variables): Keras then starts the optimizer afresh, and so
// does kx.
struct KerasOptimizerPaths {
  std::string iterations;
  std::string learning_rate;            // "" when absent (Keras 2 files)
  std::vector<std::vector<std::string>> slots;  // slots[j][i]: slot j of trained weight i
};
// Keras 3 lists the slots weight by weight (Adam: m, v of each) when an optimizer adds them in one
// call, and slot by slot (RMSprop: every velocity, then every momentum) when it adds each in its own:
// by_slot says which.
std::optional<KerasOptimizerPaths> keras_optimizer_paths(const io::Hdf5Tree& f, size_t trained, int slots,
                                                         bool by_slot = false);

}  // namespace kx::core
