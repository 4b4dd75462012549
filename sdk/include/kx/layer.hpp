// Layer descriptions of the C++ API: what a model is made of (the computation lives in sdk/src/core).
#pragma once
#include <cstdint>
#include <string>

namespace kx {

enum class Activation { None = 0, Relu = 1, Sigmoid = 2, Tanh = 3, Softmax = 4 };

const char* activation_name(Activation a);
// "relu" -> Relu ...; throws InvalidArgument for an unknown name.
Activation activation_from_name(const std::string& name);

enum class LayerKind { Dense, Flatten, Dropout };

struct LayerSpec {
  LayerKind kind = LayerKind::Dense;
  std::string name;            // unique in the model; generated ("dense_1") when empty
  int64_t units = 0;           // Dense
  Activation activation = Activation::None;  // Dense
  float rate = 0.0f;           // Dropout
};

}  // namespace kx
