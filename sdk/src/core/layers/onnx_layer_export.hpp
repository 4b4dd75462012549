// What a layer sees while it writes itself into an ONNX inference graph (opset 13): its inputs' values,
// its weights, and the graph. Every layer answers Layer::export_onnx, with nodes or with
// not_exportable(), so a layer cannot be added without deciding its ONNX form.
//
// kx holds images channels-last ([N, H, W, C], as Keras); ONNX's Conv, pooling and BatchNormalization
// want NCHW. Each value is kept in the layout it was made in, and a Transpose converts it only where
// a reader needs the other one (input_nchw / input_plain make it once, on first use).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/onnx_graph.hpp"
#include "kx/layer.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

// The model's values in the graph being written: value 0 is the model's input, value i + 1 the
// output of layer i; each has a name in kx's order, in NCHW, or both.
class OnnxValues {
 public:
  OnnxValues(io::OnnxGraph& graph, std::vector<Shape> shapes, const std::string& input_name);

  io::OnnxGraph& graph() { return graph_; }
  const Shape& shape(int t) const { return shapes_[static_cast<size_t>(t)]; }
  bool is_image(int t) const { return shape(t).size() == 3; }
  // The rank with the batch axis.
  int64_t rank(int t) const { return static_cast<int64_t>(shape(t).size()) + 1; }
  // Value t in kx's order (images [N, H, W, C]) / an image as [N, C, H, W].
  std::string plain(int t);
  std::string nchw(int t);
  // An element-wise reader takes t in the layout it already has: NCHW when t is an image made so.
  bool prefers_nchw(int t) const { return is_image(t) && !nchw_[static_cast<size_t>(t)].empty(); }
  void set(int t, const std::string& name, bool nchw_layout);
  // Value t is value `from` (an identity at inference).
  void alias(int t, int from);
  // Value t carries a Keras mask (Embedding's mask_zero, passed on as the training plan does).
  bool masked(int t) const { return masked_[static_cast<size_t>(t)]; }
  void set_masked(int t) { masked_[static_cast<size_t>(t)] = true; }

 private:
  io::OnnxGraph& graph_;
  std::vector<Shape> shapes_;
  std::vector<std::string> plain_, nchw_;  // per value: its name in each layout ("" = not made)
  std::vector<bool> masked_;
};

class OnnxLayerExport {
 public:
  OnnxLayerExport(OnnxValues& values, std::string name, std::string class_name, std::vector<int> inputs, int output,
                  std::vector<std::vector<float>> weights)
      : values_(values),
        name_(std::move(name)),
        class_name_(std::move(class_name)),
        inputs_(std::move(inputs)),
        output_(output),
        weights_(std::move(weights)) {}

  // The layer's name: its nodes and constants are named after it.
  const std::string& name() const { return name_; }
  size_t num_inputs() const { return inputs_.size(); }
  const Shape& input_shape(size_t k = 0) const { return values_.shape(input(k)); }
  bool input_is_image(size_t k = 0) const { return values_.is_image(input(k)); }
  int64_t input_rank(size_t k = 0) const { return values_.rank(input(k)); }
  std::string input_plain(size_t k = 0) { return values_.plain(input(k)); }
  std::string input_nchw(size_t k = 0) { return values_.nchw(input(k)); }
  bool input_prefers_nchw(size_t k = 0) const { return values_.prefers_nchw(input(k)); }
  // Whether input k carries a Keras mask, which the layer must export exactly or refuse.
  bool input_masked(size_t k = 0) const { return values_.masked(input(k)); }
  // Input k, a sequence [N, steps, C], as [N, C, steps] for ONNX's 1-D Conv and pooling. It is reshaped
  // to its declared shape first: OpenCV feeds a rank-3 input with a trailing unit axis.
  std::string input_ncl(size_t k = 0);
  // Input k, a sequence, as its declared [N, steps, C] (the same reshape).
  std::string input_sequence(size_t k = 0);
  // Input k in the layout an element-wise node keeps (nchw_layout says which).
  std::string input_as(size_t k, bool nchw_layout) { return nchw_layout ? input_nchw(k) : input_plain(k); }
  // The layer's parameters, in its params() order.
  const std::vector<std::vector<float>>& weights() const { return weights_; }

  // A float32 constant named "<layer>/<suffix>"; returns its name. (A view and a list: the many call
  // sites build no string or vector of their own.)
  std::string constant(std::string_view suffix, std::initializer_list<int64_t> dims, std::vector<float> values);
  std::string constant_ints(std::string_view suffix, std::initializer_list<int64_t> dims, std::vector<int64_t> values);
  void node(std::string_view op_type, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<io::OnnxAttribute>& attributes = {});
  // The same from braced lists of names (preferred for {a, b}): the call sites build no vectors.
  void node(std::string_view op_type, std::initializer_list<std::string_view> inputs,
            std::initializer_list<std::string_view> outputs, const std::vector<io::OnnxAttribute>& attributes = {});
  // Compact forms for layers that write many nodes (recurrent layers, attention): a value name that
  // begins with '/' is the layer's own ("/scores" is "<layer>/scores"); others (inputs, constants) are
  // full names. Each returns its output's full name.
  std::string step(const char* op_type, std::initializer_list<std::string_view> inputs, std::string_view output);
  std::string step(const char* op_type, std::initializer_list<std::string_view> inputs, std::string_view output,
                   std::vector<io::OnnxAttribute> attributes);
  std::string transpose(std::string_view x, std::string_view output, std::vector<int64_t> perm);
  // x reshaped to `shape` (a constant named after the output).
  std::string reshape(std::string_view x, std::string_view output, std::vector<int64_t> shape);
  // act applied to x into `out` (softmax over `axis`); returns the result's name (x for None).
  std::string activation(Activation act, const std::string& x, const std::string& out, int64_t axis);
  // One node of a formula: op(a, b, c) into `into`. Inputs: "x" the formula's input, "$" the step's
  // constant (one element, broadcast, made once per name), "" none, else an earlier step's output;
  // into: a step's name, or "" for the formula's output. Steps are named out/<name>. (A table of steps
  // is much less code than as many node calls; names held in place, as pointers would each need a
  // relocation when libkx loads.)
  struct FormulaStep {
    char op[8];
    char a[13];
    char b[13];
    char into[13];
    char constant[15] = "";
    float value = 0;
    char c[2] = "";
    // A step from names known only at run time (each cut to its field).
    static FormulaStep of(const char* op, const char* a, const char* b, const char* into, const char* constant = "",
                          float value = 0, const char* c = "");
  };
  // The steps from x into `out`; returns out.
  std::string formula(std::span<const FormulaStep> steps, const std::string& x, const std::string& out,
                      std::string_view constant_prefix = "");
  // y = gamma * (x - mean) / sqrt(variance + epsilon) + beta over the last axis of kx's order, into the
  // layer's output.
  void normalize(const std::vector<float>& gamma, const std::vector<float>& beta, const std::vector<float>& mean,
                 const std::vector<float>& variance, double epsilon);

  // The layer's output is the value `name`, in NCHW or in kx's order.
  void output(const std::string& name, bool nchw_layout) { values_.set(output_, name, nchw_layout); }
  // The layer's output is its input k's value (an identity at inference: Dropout).
  void output_is_input(size_t k = 0) { values_.alias(output_, input(k)); }
  // Unsupported: the layer has no ONNX form (why says what is missing).
  [[noreturn]] void not_exportable(const std::string& why) const;

 private:
  int input(size_t k) const { return inputs_.at(k); }
  OnnxValues& values_;
  std::string name_, class_name_;
  std::vector<int> inputs_;
  int output_;
  std::vector<std::vector<float>> weights_;
};

}  // namespace kx::core
