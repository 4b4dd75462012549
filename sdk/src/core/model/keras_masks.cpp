#include "core/model/keras_masks.hpp"

#include <set>
#include <utility>
#include <string>

namespace kx::core {

using json::Value;

namespace {

// The tensor a Keras 3 argument refers to, as text ("[layer, node, index]"), or "" for none.
std::string tensor_key(const Value& arg) {
  if (arg.type() != Value::Type::Object) return "";
  const Value* config = arg.find("config");
  const Value* history = config ? config->find("keras_history") : nullptr;
  return history ? history->dump() : "";
}

const Value* first_call_args(const Value& layer) {
  const Value* nodes = layer.find("inbound_nodes");
  if (!nodes || nodes->type() != Value::Type::Array || nodes->as_array("inbound_nodes").size() != 1) return nullptr;
  const Value* args = nodes->as_array("inbound_nodes").front().find("args");
  return args && args->type() == Value::Type::Array ? args : nullptr;
}

std::string class_of(const Value& layer) {
  const Value* c = layer.find("class_name");
  return c && c->type() == Value::Type::String ? c->as_string("class_name") : "";
}

std::string name_of(const Value& layer) {
  const Value* config = layer.find("config");
  const Value* name = config ? config->find("name") : nullptr;
  if (!name) name = layer.find("name");
  return name && name->type() == Value::Type::String ? name->as_string("name") : "";
}

// The layer whose output an argument is ("" for none).
std::string source_layer(const Value& arg) {
  const Value* c = arg.type() == Value::Type::Object ? arg.find("config") : nullptr;
  const Value* h = c ? c->find("keras_history") : nullptr;
  if (!h || h->type() != Value::Type::Array || h->as_array("keras_history").empty()) return "";
  const Value& layer = h->as_array("keras_history").front();
  return layer.type() == Value::Type::String ? layer.as_string("keras_history") : "";
}

// An object without one key.
Value without(const Value& object, const std::string& key) {
  Value out{Value::Object{}};
  for (const auto& [k, v] : object.as_object("object"))
    if (k != key) out.set(k, v);
  return out;
}

// An object with one member replaced.
Value replaced(const Value& object, const std::string& key, Value with) {
  Value out{Value::Object{}};
  for (const auto& [k, v] : object.as_object("object")) out.set(k, k == key ? with : v);
  return out;
}

}  // namespace

Value without_keras_mask_nodes(const Value& model) {
  const Value* config = model.find("config");
  const Value* layers = config ? config->find("layers") : nullptr;
  if (!layers || layers->type() != Value::Type::Array) return model;
  // The tensors Embedding layers with mask_zero and Masking layers read, with the value each compares
  // them against (0, mask_value): their masks are kx's own.
  std::set<std::string> embedding_inputs;
  std::set<std::pair<std::string, double>> masking_inputs;
  for (const Value& l : layers->as_array("layers")) {
    const Value* c = l.find("config");
    const Value* args = first_call_args(l);
    if (!args || args->as_array("args").empty()) continue;
    const std::string input = tensor_key(args->as_array("args").front());
    const Value* mask_zero = c ? c->find("mask_zero") : nullptr;
    if (class_of(l) == "Embedding" && mask_zero && mask_zero->type() == Value::Type::Bool &&
        mask_zero->as_bool("mask_zero"))
      embedding_inputs.insert(input);
    if (class_of(l) == "Masking") {
      const Value* v = c ? c->find("mask_value") : nullptr;
      if (!v) masking_inputs.emplace(input, 0.0);
      else if (v->type() == Value::Type::Number) masking_inputs.emplace(input, v->as_number("mask_value"));
    }
  }
  std::set<std::string> mask_nodes, not_equal_nodes;
  for (const Value& l : layers->as_array("layers")) {
    const Value* args = first_call_args(l);
    if (class_of(l) != "NotEqual" || !args || args->as_array("args").size() != 2) continue;
    const Value::Array& a = args->as_array("args");
    if (a[1].type() != Value::Type::Number) continue;
    const double against = a[1].as_number("not_equal");
    if (against == 0 && embedding_inputs.count(tensor_key(a[0]))) mask_nodes.insert(name_of(l));
    if (masking_inputs.count({tensor_key(a[0]), against})) not_equal_nodes.insert(name_of(l));
  }
  // Embedding's mask is the NotEqual itself; Masking's is any(NotEqual, axis=-1).
  for (const Value& l : layers->as_array("layers")) {
    const Value* args = first_call_args(l);
    if (class_of(l) != "Any" || !args || args->as_array("args").size() != 1) continue;
    const Value* c = l.find("config");
    const Value* axis = c ? c->find("axis") : nullptr;
    const Value* keepdims = c ? c->find("keepdims") : nullptr;
    const bool last_axis = axis && axis->type() == Value::Type::Number && axis->as_number("axis") == -1;
    const bool dropped = !keepdims || (keepdims->type() == Value::Type::Bool && !keepdims->as_bool("keepdims"));
    if (last_axis && dropped && not_equal_nodes.count(source_layer(args->as_array("args").front()))) {
      mask_nodes.insert(name_of(l));
      mask_nodes.insert(source_layer(args->as_array("args").front()));
    }
  }
  // Keras's merge layers combine their inputs' masks with logical operations of the masks alone (Add's
  // compute_mask: logical_or): kx combines them itself too. Layers come in graph order.
  for (const Value& l : layers->as_array("layers")) {
    const Value* args = first_call_args(l);
    const std::string cls = class_of(l);
    if (!args || (cls != "LogicalOr" && cls != "LogicalAnd")) continue;
    bool of_masks = !args->as_array("args").empty();
    for (const Value& a : args->as_array("args")) {
      const Value* c = a.type() == Value::Type::Object ? a.find("config") : nullptr;
      const Value* h = c ? c->find("keras_history") : nullptr;
      of_masks = of_masks && h && h->type() == Value::Type::Array && !h->as_array("keras_history").empty() &&
                 h->as_array("keras_history").front().type() == Value::Type::String &&
                 mask_nodes.count(h->as_array("keras_history").front().as_string("keras_history"));
    }
    if (of_masks) mask_nodes.insert(name_of(l));
  }
  if (mask_nodes.empty()) return model;
  Value::Array kept;
  for (const Value& l : layers->as_array("layers")) {
    if (mask_nodes.count(name_of(l))) continue;
    const Value* nodes = l.find("inbound_nodes");
    if (!nodes || nodes->type() != Value::Type::Array) {
      kept.push_back(l);
      continue;
    }
    Value::Array calls;
    for (const Value& call : nodes->as_array("inbound_nodes")) {
      const Value* kwargs = call.type() == Value::Type::Object ? call.find("kwargs") : nullptr;
      const Value* mask = kwargs && kwargs->type() == Value::Type::Object ? kwargs->find("mask") : nullptr;
      std::string from;
      if (mask) {
        const Value* c = mask->find("config");
        const Value* h = c ? c->find("keras_history") : nullptr;
        if (h && h->type() == Value::Type::Array && !h->as_array("keras_history").empty() &&
            h->as_array("keras_history").front().type() == Value::Type::String)
          from = h->as_array("keras_history").front().as_string("keras_history");
      }
      calls.push_back(mask_nodes.count(from) ? replaced(call, "kwargs", without(*kwargs, "mask")) : call);
    }
    kept.push_back(replaced(l, "inbound_nodes", Value(std::move(calls))));
  }
  return replaced(model, "config", replaced(*config, "layers", Value(std::move(kept))));
}

}  // namespace kx::core
