#include "core/layers/layer.hpp"

#include "core/layers/layer_registry.hpp"
#include "core/layers/tensor_operation.hpp"
#include "kx/error.hpp"

namespace kx::core {

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) { return layer_entry(spec.kind).make(spec); }

void require_last_axis(const LayerSpec& spec, const Shape& in, const char* class_name) {
  require(spec.axis == -1 || spec.axis == static_cast<int64_t>(in.size()), Status::Unsupported,
          std::string(class_name) + " layer \"" + spec.name + "\": axis " + std::to_string(spec.axis) +
              " is not supported, only the last (channels) axis (-1 or " + std::to_string(in.size()) + ")");
}

void refuse_masks(const std::vector<int>& sources, const Layer& layer) {
  for (int m : sources)
    require(m < 0, Status::Unsupported,
            std::string(layer.class_name()) + " layer \"" + layer.name() +
                "\" reads a tensor with a Keras mask (Embedding's mask_zero): Keras's masking in this layer is not "
                "supported");
}

Shape Layer::build_inputs(const std::vector<Shape>& inputs) {
  require(inputs.size() == 1, Status::InvalidArgument,
          std::string(class_name()) + " layer \"" + name() + "\" takes one input, not " + std::to_string(inputs.size()));
  return build(inputs.front());
}

const char* Layer::class_name() const { return layer_entry(spec_.kind).class_name; }

json::Value Layer::to_json() const {
  json::Value config{json::Value::Object{}};
  config.set("name", spec_.name);
  config.set("trainable", spec_.trainable);
  add_config(config);
  json::Value out{json::Value::Object{}};
  out.set("class_name", class_name());
  out.set("config", std::move(config));
  return out;
}

namespace {

// Keras's regularizers and constraints change what training does and kx has none: a layer (or the
// layer a Bidirectional wraps) that names one is refused, never trained without it.
void refuse_regularizers(const json::Value& config, const std::string& what) {
  for (const auto& entry : config.as_object(what)) {
    const std::string& key = entry.first;
    const auto ends_with = [&](const std::string& suffix) {
      return key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if ((ends_with("_regularizer") || ends_with("_constraint")) && !entry.second.is_null())
      fail(Status::Unsupported, what + ": attribute " + key + " = " + entry.second.dump() + " is not supported");
    if (const json::Value* inner = entry.second.find("config"); inner && (key == "layer" || key == "backward_layer"))
      refuse_regularizers(*inner, what + " " + key);
  }
}

}  // namespace

LayerSpec layer_spec_from_json(const json::Value& v) {
  if (is_keras_operation_node(v)) return operation_spec_from_keras(v);  // x * 2.0 in a Keras 3 config
  const std::string cls = v.at("class_name", "layer").as_string("layer class_name");
  const json::Value& config = v.at("config", "layer \"" + cls + "\"");
  config.as_object("config of layer \"" + cls + "\"");
  LayerSpec spec;
  if (const json::Value* name = config.find("name")) spec.name = name->as_string(cls + " name");
  const std::string what = cls + " \"" + spec.name + "\"";
  if (const json::Value* t = config.find("trainable")) spec.trainable = t->as_bool(what + " trainable");
  const LayerEntry* entry = find_layer_entry(cls);
  require(entry != nullptr, Status::InvalidArgument, "unknown layer class \"" + cls + "\"");
  spec.kind = entry->kind;
  refuse_regularizers(config, what);
  spec.config = config.dump();
  // The call's keyword arguments, for a layer added alone (a functional config keeps them in the
  // inbound node instead): {"class_name": "MultiHeadAttention", ..., "kwargs": {"use_causal_mask": true}}.
  if (const json::Value* kwargs = v.find("kwargs")) {
    kwargs->as_object(what + " kwargs");
    spec.call_config = kwargs->dump();
  }
  entry->read_config(config, what, spec);
  return spec;
}

}  // namespace kx::core

namespace kx {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "linear";
    case Activation::Relu: return "relu";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Tanh: return "tanh";
    case Activation::Softmax: return "softmax";
    case Activation::Relu6: return "relu6";
    case Activation::Silu: return "silu";
    case Activation::HardSilu: return "hard_silu";
    case Activation::HardSigmoid: return "hard_sigmoid";
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_approximate";
    case Activation::Elu: return "elu";
    case Activation::LeakyRelu: return "leaky_relu";
    case Activation::Softplus: return "softplus";
  }
  return "?";
}

Activation activation_from_name(const std::string& name) {
  if (name == "linear" || name == "none") return Activation::None;
  if (name == "relu") return Activation::Relu;
  if (name == "sigmoid") return Activation::Sigmoid;
  if (name == "tanh") return Activation::Tanh;
  if (name == "softmax") return Activation::Softmax;
  if (name == "swish") return Activation::Silu;  // Keras's aliases
  if (name == "hard_swish") return Activation::HardSilu;
  // GeluTanh is no Keras activation name: only the gelu op (approximate=True) makes it.
  for (int a = static_cast<int>(Activation::Relu6); a < kActivationCount; ++a)
    if (a != static_cast<int>(Activation::GeluTanh) && name == activation_name(static_cast<Activation>(a)))
      return static_cast<Activation>(a);
  fail(Status::InvalidArgument, "unknown activation \"" + name + "\"");
}

}  // namespace kx
