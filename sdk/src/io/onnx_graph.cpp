#include "io/onnx_graph.hpp"

#include <cstring>

namespace kx::io {
namespace {

// Field numbers of onnx/onnx.proto (a proto2 file: repeated integers are written unpacked).
namespace model {
constexpr int kIrVersion = 1, kProducerName = 2, kProducerVersion = 3, kGraph = 7, kOpsetImport = 8;
}
namespace opset {
constexpr int kDomain = 1, kVersion = 2;
}
namespace graph {
constexpr int kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
}
namespace node {
constexpr int kInput = 1, kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5;
}
namespace attribute {
constexpr int kName = 1, kF = 2, kI = 3, kS = 4, kFloats = 7, kInts = 8, kStrings = 9, kType = 20;
constexpr int kFloat = 1, kInt = 2, kString = 3, kFloatList = 6, kIntList = 7, kStringList = 8;  // AttributeType
}
namespace tensor {
constexpr int kDims = 1, kDataType = 2, kName = 8, kRawData = 9;
constexpr int kFloat = 1, kInt64 = 7;  // TensorProto.DataType
}
namespace value_info {
constexpr int kName = 1, kType = 2;
}
namespace type {
constexpr int kTensorType = 1;  // TypeProto
constexpr int kElemType = 1, kShape = 2;  // TypeProto.Tensor
constexpr int kDim = 1;  // TensorShapeProto
constexpr int kDimValue = 1, kDimParam = 2;  // TensorShapeProto.Dimension
}

template <class T>
ProtoWriter tensor_proto(const std::string& name, const std::vector<int64_t>& dims, int data_type,
                         const std::vector<T>& values) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float32 or int64");
  ProtoWriter t;
  for (int64_t d : dims) t.varint(tensor::kDims, d);
  t.varint(tensor::kDataType, data_type);
  t.bytes(tensor::kName, name);
  // raw_data is little-endian, as this host is (x86-64, AArch64).
  std::string raw(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  t.bytes(tensor::kRawData, raw);
  return t;
}

}  // namespace

OnnxAttribute OnnxAttribute::integer(std::string name, int64_t v) { return {std::move(name), Type::Int, v, 0, {}}; }
OnnxAttribute OnnxAttribute::real(std::string name, float v) { return {std::move(name), Type::Float, 0, v, {}}; }
OnnxAttribute OnnxAttribute::ints(std::string name, std::vector<int64_t> v) {
  return {std::move(name), Type::Ints, 0, 0, std::move(v)};
}
OnnxAttribute OnnxAttribute::text(std::string name, std::string v) {
  return {std::move(name), Type::String, 0, 0, {}, std::move(v)};
}
OnnxAttribute OnnxAttribute::reals(std::string name, std::vector<float> v) {
  return {std::move(name), Type::Floats, 0, 0, {}, {}, std::move(v)};
}
OnnxAttribute OnnxAttribute::texts(std::string name, std::vector<std::string> v) {
  return {std::move(name), Type::Strings, 0, 0, {}, {}, {}, std::move(v)};
}

ProtoWriter OnnxGraph::value_info(const std::string& name, const std::vector<int64_t>& sample_dims) const {
  ProtoWriter shape;
  ProtoWriter batch;
  batch.bytes(type::kDimParam, "batch");
  shape.message(type::kDim, batch);
  for (int64_t d : sample_dims) {
    ProtoWriter dim;
    dim.varint(type::kDimValue, d);
    shape.message(type::kDim, dim);
  }
  ProtoWriter tensor_type;
  tensor_type.varint(type::kElemType, tensor::kFloat);
  tensor_type.message(type::kShape, shape);
  ProtoWriter type_proto;
  type_proto.message(type::kTensorType, tensor_type);
  ProtoWriter v;
  v.bytes(value_info::kName, name);
  v.message(value_info::kType, type_proto);
  return v;
}

void OnnxGraph::add_input(const std::string& name, const std::vector<int64_t>& sample_dims) {
  inputs_.push_back(value_info(name, sample_dims));
}

void OnnxGraph::add_output(const std::string& name, const std::vector<int64_t>& sample_dims) {
  outputs_.push_back(value_info(name, sample_dims));
}

void OnnxGraph::add_initializer(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
  initializers_.push_back(tensor_proto(name, dims, tensor::kFloat, values));
}

void OnnxGraph::add_initializer(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& values) {
  initializers_.push_back(tensor_proto(name, dims, tensor::kInt64, values));
}

void OnnxGraph::add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::vector<OnnxAttribute>& attributes) {
  ProtoWriter n;
  for (const auto& i : inputs) n.bytes(node::kInput, i);
  for (const auto& o : outputs) n.bytes(node::kOutput, o);
  n.bytes(node::kName, outputs.front());
  n.bytes(node::kOpType, op_type);
  for (const auto& a : attributes) {
    ProtoWriter w;
    w.bytes(attribute::kName, a.name);
    switch (a.type) {
      case OnnxAttribute::Type::Int:
        w.varint(attribute::kI, a.i);
        w.varint(attribute::kType, attribute::kInt);
        break;
      case OnnxAttribute::Type::Float:
        w.float32(attribute::kF, a.f);
        w.varint(attribute::kType, attribute::kFloat);
        break;
      case OnnxAttribute::Type::Ints:
        for (int64_t v : a.list) w.varint(attribute::kInts, v);
        w.varint(attribute::kType, attribute::kIntList);
        break;
      case OnnxAttribute::Type::String:
        w.bytes(attribute::kS, a.s);
        w.varint(attribute::kType, attribute::kString);
        break;
      case OnnxAttribute::Type::Floats:
        for (float v : a.floats) w.float32(attribute::kFloats, v);
        w.varint(attribute::kType, attribute::kFloatList);
        break;
      case OnnxAttribute::Type::Strings:
        for (const auto& v : a.strings) w.bytes(attribute::kStrings, v);
        w.varint(attribute::kType, attribute::kStringList);
        break;
    }
    n.message(node::kAttribute, w);
  }
  nodes_.push_back(std::move(n));
}

std::string OnnxGraph::model_bytes(int64_t ir_version, int64_t opset, const std::string& producer,
                                   const std::string& producer_version) const {
  ProtoWriter g;
  for (const auto& n : nodes_) g.message(graph::kNode, n);
  g.bytes(graph::kName, name_);
  for (const auto& t : initializers_) g.message(graph::kInitializer, t);
  for (const auto& v : inputs_) g.message(graph::kInput, v);
  for (const auto& v : outputs_) g.message(graph::kOutput, v);
  ProtoWriter op;
  op.bytes(opset::kDomain, "");
  op.varint(opset::kVersion, opset);
  ProtoWriter m;
  m.varint(model::kIrVersion, ir_version);
  m.bytes(model::kProducerName, producer);
  m.bytes(model::kProducerVersion, producer_version);
  m.message(model::kGraph, g);
  m.message(model::kOpsetImport, op);
  return m.data();
}

}  // namespace kx::io
