// An ONNX graph being written: nodes, initializers (weights), the input and the output, serialised as
// a ModelProto (onnx/onnx.proto) by the small protobuf encoder. Names are the caller's: ONNX links
// nodes by the names of the values they read and write.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/protobuf_writer.hpp"

namespace kx::io {

// One attribute of a node: an integer, a float, a list of integers, a string, or a list of floats or
// of strings (a recurrent node's activations and their parameters).
struct OnnxAttribute {
  enum class Type { Int, Float, Ints, String, Floats, Strings };
  // Out of line: the many call sites stay small.
  static OnnxAttribute integer(std::string name, int64_t v);
  static OnnxAttribute real(std::string name, float v);
  static OnnxAttribute ints(std::string name, std::vector<int64_t> v);
  static OnnxAttribute text(std::string name, std::string v);
  static OnnxAttribute reals(std::string name, std::vector<float> v);
  static OnnxAttribute texts(std::string name, std::vector<std::string> v);
  std::string name;
  Type type;
  int64_t i;
  float f;
  std::vector<int64_t> list;
  std::string s{};
  std::vector<float> floats{};
  std::vector<std::string> strings{};
};

class OnnxGraph {
 public:
  explicit OnnxGraph(std::string name) : name_(std::move(name)) {}

  // A float32 value dims ([N, ...] with N symbolic as "batch") that the caller feeds / receives.
  void add_input(const std::string& name, const std::vector<int64_t>& sample_dims);
  void add_output(const std::string& name, const std::vector<int64_t>& sample_dims);
  // Constant tensors, stored as raw little-endian data.
  void add_initializer(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  void add_initializer(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values);
  void add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                const std::vector<std::string>& outputs, const std::vector<OnnxAttribute>& attributes = {});

  // The ModelProto bytes: IR version, the default-domain opset, producer, the graph.
  std::string model_bytes(int64_t ir_version, int64_t opset, const std::string& producer,
                          const std::string& producer_version) const;

 private:
  ProtoWriter value_info(const std::string& name, const std::vector<int64_t>& sample_dims) const;
  std::string name_;
  std::vector<ProtoWriter> nodes_, initializers_, inputs_, outputs_;
};

}  // namespace kx::io
