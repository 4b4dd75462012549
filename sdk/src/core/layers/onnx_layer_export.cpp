#include "core/layers/onnx_layer_export.hpp"

#include <cmath>

#include "kx/error.hpp"

namespace kx::core {

using io::OnnxAttribute;

OnnxValues::OnnxValues(io::OnnxGraph& graph, std::vector<Shape> shapes, const std::string& input_name)
    : graph_(graph), shapes_(std::move(shapes)) {
  plain_.resize(shapes_.size());
  nchw_.resize(shapes_.size());
  masked_.resize(shapes_.size());
  plain_[0] = input_name;
}

std::string OnnxValues::plain(int t) {
  std::string& name = plain_[static_cast<size_t>(t)];
  if (name.empty()) {
    name = nchw_[static_cast<size_t>(t)] + "/nhwc";
    graph_.add_node("Transpose", {nchw_[static_cast<size_t>(t)]}, {name}, {OnnxAttribute::ints("perm", {0, 2, 3, 1})});
  }
  return name;
}

std::string OnnxValues::nchw(int t) {
  std::string& name = nchw_[static_cast<size_t>(t)];
  if (name.empty()) {
    name = plain_[static_cast<size_t>(t)] + "/nchw";
    graph_.add_node("Transpose", {plain_[static_cast<size_t>(t)]}, {name}, {OnnxAttribute::ints("perm", {0, 3, 1, 2})});
  }
  return name;
}

void OnnxValues::set(int t, const std::string& name, bool nchw_layout) {
  (nchw_layout ? nchw_ : plain_)[static_cast<size_t>(t)] = name;
}

void OnnxValues::alias(int t, int from) {
  plain_[static_cast<size_t>(t)] = plain_[static_cast<size_t>(from)];
  nchw_[static_cast<size_t>(t)] = nchw_[static_cast<size_t>(from)];
}

std::string OnnxLayerExport::constant(std::string_view suffix, std::initializer_list<int64_t> dims,
                                      std::vector<float> values) {
  std::string name = name_ + "/" + std::string(suffix);
  values_.graph().add_initializer(name, dims, values);
  return name;
}

std::string OnnxLayerExport::constant_ints(std::string_view suffix, std::initializer_list<int64_t> dims,
                                           std::vector<int64_t> values) {
  std::string name = name_ + "/" + std::string(suffix);
  values_.graph().add_initializer(name, dims, values);
  return name;
}

std::string OnnxLayerExport::input_sequence(size_t k) {
  const Shape& s = input_shape(k);
  require(s.size() == 2, Status::Internal, "ONNX export: layer \"" + name_ + "\" reads a sequence of rank 2");
  const std::string out = name_ + "/sequence";
  node("Reshape", {input_plain(k), constant_ints("sequence_shape", {3}, {-1, s[0], s[1]})}, {out});
  return out;
}

std::string OnnxLayerExport::input_ncl(size_t k) {
  const std::string out = name_ + "/ncl";
  node("Transpose", {input_sequence(k)}, {out}, {OnnxAttribute::ints("perm", {0, 2, 1})});
  return out;
}

void OnnxLayerExport::node(std::string_view op_type, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::vector<OnnxAttribute>& attributes) {
  values_.graph().add_node(std::string(op_type), inputs, outputs, attributes);
}

void OnnxLayerExport::node(std::string_view op_type, std::initializer_list<std::string_view> inputs,
                           std::initializer_list<std::string_view> outputs,
                           const std::vector<OnnxAttribute>& attributes) {
  node(op_type, std::vector<std::string>(inputs.begin(), inputs.end()),
       std::vector<std::string>(outputs.begin(), outputs.end()), attributes);
}

std::string OnnxLayerExport::step(const char* op_type, std::initializer_list<std::string_view> inputs,
                                  std::string_view output) {
  return step(op_type, inputs, output, {});
}

std::string OnnxLayerExport::step(const char* op_type, std::initializer_list<std::string_view> inputs,
                                  std::string_view output, std::vector<OnnxAttribute> attributes) {
  const auto full = [&](std::string_view v) { return v.front() == '/' ? name_ + std::string(v) : std::string(v); };
  std::vector<std::string> names;
  for (std::string_view v : inputs) names.push_back(full(v));
  std::string out = full(output);
  node(op_type, names, std::vector<std::string>{out}, attributes);
  return out;
}

std::string OnnxLayerExport::transpose(std::string_view x, std::string_view output, std::vector<int64_t> perm) {
  return step("Transpose", {x}, output, {OnnxAttribute::ints("perm", std::move(perm))});
}

std::string OnnxLayerExport::reshape(std::string_view x, std::string_view output, std::vector<int64_t> shape) {
  const auto rank = static_cast<int64_t>(shape.size());
  const std::string dims = constant_ints(std::string(output.substr(1)) + "_shape", {rank}, std::move(shape));
  return step("Reshape", {x, dims}, output);
}

// ONNX's BatchNormalization (inference form) where the normalised axis is ONNX's axis 1 (images as
// NCHW, vectors), else the same as x * scale + shift, broadcast along the last axis.
void OnnxLayerExport::normalize(const std::vector<float>& gamma, const std::vector<float>& beta,
                                const std::vector<float>& mean, const std::vector<float>& variance, double epsilon) {
  const auto C = static_cast<int64_t>(gamma.size());
  if (input_is_image() || input_rank() == 2) {
    const bool image = input_is_image();
    node("BatchNormalization",
         {image ? input_nchw() : input_plain(), constant("gamma", {C}, gamma), constant("beta", {C}, beta),
          constant("mean", {C}, mean), constant("variance", {C}, variance)},
         {name_}, {OnnxAttribute::real("epsilon", static_cast<float>(epsilon))});
    return output(name_, image);
  }
  std::vector<float> scale(gamma.size()), shift(gamma.size());
  for (size_t c = 0; c < gamma.size(); ++c) {
    const double s = gamma[c] / std::sqrt(static_cast<double>(variance[c]) + epsilon);
    scale[c] = static_cast<float>(s);
    shift[c] = static_cast<float>(beta[c] - mean[c] * s);
  }
  node("Mul", {input_plain(), constant("scale", {C}, scale)}, {name_ + "/scaled"});
  node("Add", {name_ + "/scaled", constant("shift", {C}, shift)}, {name_});
  output(name_, false);
}

void OnnxLayerExport::not_exportable(const std::string& why) const {
  fail(Status::Unsupported,
       "ONNX export: layer \"" + name_ + "\" (" + class_name_ + ") has no ONNX form: " + why);
}

}  // namespace kx::core
