// Keras 3's operation nodes <-> kx's TensorOperation layers (tensor_operation.hpp). Keras writes
// `x * 2.0` as {"module": "keras.src.ops.numpy", "class_name": "Multiply", "config": {"name": ...},
// "inbound_nodes": [{"args": [<the tensor>, 2.0], "kwargs": {}}]}.
#include "core/layers/tensor_operation.hpp"
#include "core/layers/tensor_operation_table.hpp"
#include "kx/error.hpp"

namespace kx::core {

using json::Value;

namespace {

bool is_string(const Value* v) { return v && v->type() == Value::Type::String; }

bool is_keras_tensor(const Value& v) {
  if (v.type() != Value::Type::Object) return false;
  const Value* cls = v.find("class_name");
  return is_string(cls) && cls->as_string("class_name") == "__keras_tensor__";
}

std::string node_name(const Value& layer) {
  if (const Value* n = layer.find("name"); is_string(n)) return n->as_string("name");
  if (const Value* c = layer.find("config"))
    if (const Value* n = c->find("name"); is_string(n)) return n->as_string("name");
  return "?";
}

// The settings an operation's config may hold besides its name.
bool known_setting(const std::string& key) {
  return key == "name" || key == "approximate" || key == "alpha" || key == "negative_slope" || key == "trainable" ||
         key == "dtype";
}

}  // namespace

bool is_keras_operation_node(const Value& layer) {
  const Value* module = layer.find("module");
  return is_string(module) && module->as_string("module").rfind("keras.src.ops", 0) == 0;
}

LayerSpec operation_spec_from_keras(const Value& layer) {
  const std::string cls = layer.at("class_name", "operation").as_string("operation class_name");
  const std::string module = layer.at("module", "operation").as_string("operation module");
  const std::string name = node_name(layer);
  const std::string what = "op " + cls + " (" + module + ", node \"" + name + "\")";
  const OperationRow* row = find_operation(cls);
  require(row != nullptr && module == row->module, Status::Unsupported,
          what + " is not supported; kx trains these operations: " + operation_names());
  Value config{Value::Object{}};
  config.set("name", name);
  config.set("operation", cls);
  if (const Value* c = layer.find("config"); c && !c->is_null())
    for (const auto& entry : c->as_object(what + " config")) {
      require(known_setting(entry.first), Status::Unsupported,
              what + ": setting " + entry.first + " = " + entry.second.dump().substr(0, 80) + " is not supported");
      if (entry.first != "name" && entry.first != "trainable" && entry.first != "dtype") config.set(entry.first, entry.second);
    }
  const Value::Array& nodes = layer.at("inbound_nodes", what).as_array(what + " inbound_nodes");
  require(nodes.size() == 1, nodes.empty() ? Status::InvalidArgument : Status::Unsupported,
          what + " is called " + std::to_string(nodes.size()) + " times; kx needs each operation called once");
  const Value& node = nodes.front();
  require(node.type() == Value::Type::Object, Status::Unsupported,
          what + ": inbound node " + node.dump().substr(0, 80) + " is not Keras 3's {\"args\", \"kwargs\"}");
  if (const Value* kwargs = node.find("kwargs"); kwargs && !kwargs->is_null())
    require(kwargs->as_object(what + " kwargs").empty(), Status::Unsupported,
            what + ": keyword arguments " + kwargs->dump().substr(0, 80) + " are not supported");
  Value::Array arguments;
  for (const Value& a : node.at("args", what).as_array(what + " args")) {
    if (is_keras_tensor(a)) {
      arguments.emplace_back();
      continue;
    }
    require(a.type() == Value::Type::Number, Status::Unsupported,
            what + ": argument " + a.dump().substr(0, 80) + " is not supported (a tensor, or a number)");
    arguments.push_back(a);
  }
  if (cls == "Negative") arguments.insert(arguments.begin(), Value(0.0));  // -x as 0 - x
  config.set("arguments", Value(std::move(arguments)));
  LayerSpec spec;
  spec.kind = LayerKind::TensorOperation;
  spec.name = name;
  spec.config = config.dump();
  return spec;
}

Value keras_operation_node(const Value& kx_layer, const std::map<std::string, Shape>& output_shapes) {
  const Value& config = kx_layer.at("config", "TensorOperation");
  const std::string name = config.at("name", "TensorOperation").as_string("name");
  const std::string op = config.at("operation", name).as_string(name + " operation");
  const OperationRow* row = find_operation(op);
  require(row != nullptr, Status::InvalidArgument, "TensorOperation \"" + name + "\": unknown operation " + op);
  // The inputs, in order, from kx's inbound node [[["input", 0, 0, {}], ...]].
  std::vector<std::string> inputs;
  for (const Value& ref : kx_layer.at("inbound_nodes", name).as_array("inbound_nodes").at(0).as_array("inbound node"))
    inputs.push_back(ref.as_array("tensor ref").at(0).as_string("tensor ref"));
  Value::Array args;
  size_t next = 0;
  const Value::Array& arguments = config.at("arguments", name).as_array(name + " arguments");
  for (size_t k = 0; k < arguments.size(); ++k) {
    if (op == "Negative" && k == 0) continue;  // kx's 0 of 0 - x
    if (!arguments[k].is_null()) {
      args.push_back(arguments[k]);
      continue;
    }
    require(next < inputs.size(), Status::InvalidArgument, "TensorOperation \"" + name + "\" has fewer inputs than arguments");
    const std::string& input = inputs[next++];
    const auto shape = output_shapes.find(input);
    require(shape != output_shapes.end(), Status::Internal, "no shape for \"" + input + "\"");
    Value::Array batch_shape{Value()};
    for (int64_t d : shape->second) batch_shape.emplace_back(d);
    Value tensor_config{Value::Object{}};
    tensor_config.set("shape", Value(std::move(batch_shape)));
    tensor_config.set("dtype", "float32");
    tensor_config.set("keras_history", Value::Array{Value(input), Value(0), Value(0)});
    Value tensor{Value::Object{}};
    tensor.set("class_name", "__keras_tensor__");
    tensor.set("config", std::move(tensor_config));
    args.push_back(std::move(tensor));
  }
  Value node{Value::Object{}};
  node.set("args", Value(std::move(args)));
  node.set("kwargs", Value::Object{});
  Value keras_config{Value::Object{}};
  keras_config.set("name", name);
  for (const char* key : {"approximate", "alpha", "negative_slope"})
    if (const Value* v = config.find(key)) keras_config.set(key, *v);
  Value out{Value::Object{}};
  out.set("module", row->module);
  out.set("class_name", op);
  out.set("config", std::move(keras_config));
  out.set("registered_name", op);
  out.set("name", name);
  out.set("inbound_nodes", Value::Array{std::move(node)});
  return out;
}

}  // namespace kx::core
