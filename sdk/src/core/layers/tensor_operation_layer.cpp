// TensorOperation: one of Keras 3's operations on tensors in a functional model (tensor_operation.hpp),
// trained as a layer: an element-wise binary operation of two inputs (with broadcasting) or of an input
// and a constant, or an activation function called as an operation (keras.ops.gelu(x, approximate)).
#include <cmath>

#include "core/layers/broadcast_shape.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/tensor_operation_table.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

// The operation's settings, read from the layer's config.
struct OperationSettings {
  const OperationRow* row = nullptr;
  // Binary: each argument a constant, or the layer's next input (is_input).
  struct Argument {
    bool is_input = true;
    float value = 0.0f;
  };
  std::vector<Argument> arguments;
  Activation activation = Activation::None;  // unary: the activation (gelu's form from "approximate")
  int inputs = 0;
};

OperationSettings read_settings(const LayerSpec& spec) {
  const std::string what = "TensorOperation \"" + spec.name + "\"";
  const json::Value config = json::parse(spec.config.empty() ? "{}" : spec.config);
  OperationSettings s;
  const std::string op = config.at("operation", what).as_string(what + " operation");
  s.row = find_operation(op);
  require(s.row != nullptr, Status::Unsupported, what + ": operation " + op + " is not supported (" + operation_names() + ")");
  if (const json::Value* args = config.find("arguments"); args && !args->is_null()) {
    for (const json::Value& a : args->as_array(what + " arguments")) {
      OperationSettings::Argument arg;
      if (!a.is_null()) {
        require(a.type() == json::Value::Type::Number, Status::Unsupported,
                what + ": argument " + a.dump().substr(0, 80) + " is not supported (an input, or a number)");
        arg.is_input = false;
        arg.value = static_cast<float>(a.as_number(what + " argument"));
        require(std::isfinite(arg.value), Status::InvalidArgument,
                what + ": argument " + a.dump() + " is not a finite float32 number");
      }
      s.arguments.push_back(arg);
    }
  } else if (op == "Negative") {
    s.arguments = {OperationSettings::Argument{false, 0.0f}, OperationSettings::Argument{}};
  } else {
    s.arguments.assign(s.row->binary ? 2 : 1, OperationSettings::Argument{});
  }
  if (op == "Negative")  // -x, as 0 - x
    require(s.arguments.size() == 2 && !s.arguments[0].is_input && s.arguments[0].value == 0.0f && s.arguments[1].is_input,
            Status::InvalidArgument, what + ": Negative's arguments are [0, null] (0 - x)");
  const size_t expected = s.row->binary ? 2 : 1;
  require(s.arguments.size() == expected, Status::InvalidArgument,
          what + ": " + op + " takes " + std::to_string(expected) + " arguments, not " + std::to_string(s.arguments.size()));
  for (const auto& a : s.arguments) s.inputs += a.is_input ? 1 : 0;
  require(s.inputs >= 1, Status::InvalidArgument, what + ": " + op + " of constants only (no input) is not a layer");
  s.activation = s.row->activation;
  if (s.row->activation == Activation::Gelu)
    if (const json::Value* approx = config.find("approximate"); approx && approx->as_bool(what + " approximate"))
      s.activation = Activation::GeluTanh;
  // The settings kx's activations fix: Keras's defaults only.
  if (const json::Value* alpha = config.find("alpha"); alpha && s.row->activation == Activation::Elu)
    require(alpha->as_number(what + " alpha") == 1.0, Status::Unsupported, what + ": elu's alpha other than 1.0 is not supported");
  if (const json::Value* slope = config.find("negative_slope"); slope && s.row->activation == Activation::LeakyRelu)
    require(static_cast<float>(slope->as_number(what + " negative_slope")) == 0.2f, Status::Unsupported,
            what + ": leaky_relu's negative_slope other than 0.2 is not supported");
  return s;
}

class TensorOperationLayer final : public Layer {
 public:
  TensorOperationLayer(const LayerSpec& spec, OperationSettings s) : Layer(spec), s_(std::move(s)) {}

  Shape build(const Shape& in) override { return build_inputs({in}); }
  Shape build_inputs(const std::vector<Shape>& in) override {
    const std::string what = "TensorOperation \"" + name() + "\" (" + s_.row->name + ")";
    require(in.size() == static_cast<size_t>(s_.inputs), Status::InvalidArgument,
            what + " takes " + std::to_string(s_.inputs) + " inputs, gets " + std::to_string(in.size()));
    size_ = num_elements(in.front());
    if (!s_.row->binary) return in.front();
    if (s_.inputs == 2) {
      shape_ = broadcast_shape(s_.row->op, in[0], in[1], what);
    } else {
      const int32_t constant = s_.arguments[0].is_input ? 1 : 0;
      shape_ = scalar_shape(s_.row->op, in[0], constant, s_.arguments[static_cast<size_t>(constant)].value, what);
    }
    return output_shape(shape_);
  }

  void forward(const LayerContext& c) const override {
    if (!s_.row->binary) {
      c.be->pointwise_activation_forward(s_.activation, c.rows * size_, c.x, c.y);
      return;
    }
    const Operands o = operands(c.xs);
    c.be->binary_forward(shape_, c.rows, o.a, o.b, c.y);
  }
  bool backward_reads_input() const override { return !s_.row->binary || backend::binary::partial_reads_operands(s_.row->op); }
  bool backward_reads_output() const override { return false; }
  void backward(const LayerContext& c) const override {
    if (!s_.row->binary) {
      if (c.dx) c.be->pointwise_activation_backward(s_.activation, c.rows * size_, c.x, c.dy, c.dx);
      return;
    }
    const Operands o = operands(c.xs);
    int input = 0;
    for (int32_t which = 0; which < 2; ++which) {
      if (!s_.arguments[static_cast<size_t>(which)].is_input) continue;
      if (float* d = c.dxs[input++]) c.be->binary_backward(shape_, c.rows, which, o.a, o.b, c.dy, d);
    }
  }

  // ONNX's Add, Sub, Mul and Div broadcast as NumPy does; constants are scalars.
  void export_onnx(OnnxLayerExport& e) const override {
    if (!s_.row->binary) {
      const bool nchw = e.input_prefers_nchw();
      e.output(e.activation(s_.activation, e.input_as(0, nchw), name(), nchw ? 1 : e.input_rank() - 1), nchw);
      return;
    }
    bool nchw = e.input_is_image(0) && e.input_prefers_nchw(0);
    if (s_.inputs == 2) nchw = e.input_is_image(0) && e.input_is_image(1) && (nchw || e.input_prefers_nchw(1));
    static constexpr const char* kOnnxOps[] = {"Add", "Sub", "Mul", "Div"};
    std::vector<std::string> operands;
    size_t input = 0;
    for (size_t k = 0; k < 2; ++k)
      operands.push_back(s_.arguments[k].is_input ? e.input_as(input++, nchw)
                                                  : e.constant("constant" + std::to_string(k), {1}, {s_.arguments[k].value}));
    e.node(kOnnxOps[static_cast<int>(s_.row->op)], operands, {name()});
    e.output(name(), nchw);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("operation", s_.row->name);
    json::Value::Array args;
    for (const auto& a : s_.arguments) args.push_back(a.is_input ? json::Value() : json::Value(static_cast<double>(a.value)));
    config.set("arguments", json::Value(std::move(args)));
    if (s_.row->activation == Activation::Gelu) config.set("approximate", s_.activation == Activation::GeluTanh);
    if (s_.row->activation == Activation::Elu) config.set("alpha", 1.0);
    if (s_.row->activation == Activation::LeakyRelu) config.set("negative_slope", 0.2);
  }

 private:
  struct Operands {
    const float* a = nullptr;
    const float* b = nullptr;
  };
  // The inputs in the arguments' places (null for a constant).
  Operands operands(const float* const* xs) const {
    Operands o;
    int input = 0;
    if (s_.arguments[0].is_input) o.a = xs[input++];
    if (s_.arguments[1].is_input) o.b = xs[input++];
    return o;
  }

  OperationSettings s_;
  backend::BinaryShape shape_;
  int64_t size_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_tensor_operation_layer(const LayerSpec& spec) {
  return std::make_unique<TensorOperationLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
