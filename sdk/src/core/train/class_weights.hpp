// Keras's class_weight turned into sample weights, as Keras 3 does for array data
// (data_adapter_utils.class_weight_to_sample_weights): each sample weighs the weight of its class.
#pragma once
#include <vector>

#include "core/train/data_feed.hpp"
#include "kx/dataset.hpp"

namespace kx::core {

// One weight per stored sample of data: class_weight[c] for a sample of class c, 1 for a class beyond
// the vector (Keras's class_weight.get(c, 1.0)). The class of a sample is its label rounded to an
// integer when it has one value, else the index of its largest value (one-hot labels). Throws
// InvalidArgument when a weight is negative or not finite, or when data carries its own sample weights
// (Keras refuses class_weight with sample_weight).
SampleWeights class_sample_weights(const Dataset& data, const std::vector<float>& class_weight);

}  // namespace kx::core
