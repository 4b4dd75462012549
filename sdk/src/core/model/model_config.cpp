// A model's architecture as Keras's JSON config: "Sequential" for a chain of layers, "Functional"
// (layers with their inbound layers) for any other graph.
#include <algorithm>
#include <set>

#include "core/model/call_arguments.hpp"
#include "core/model/model_impl.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"
#include "kx/version.hpp"

namespace kx {

namespace {

json::Value input_layer_json(const core::Network& net, bool functional) {
  json::Value::Array batch_shape{json::Value()};
  for (int64_t d : net.shapes.front()) batch_shape.emplace_back(d);
  json::Value config{json::Value::Object{}};
  config.set("batch_shape", std::move(batch_shape));
  if (functional) config.set("name", net.input_name);
  json::Value input{json::Value::Object{}};
  input.set("class_name", "InputLayer");
  if (functional) input.set("name", net.input_name);
  input.set("config", std::move(config));
  if (functional) input.set("inbound_nodes", json::Value::Array{});
  return input;
}

// ["name", 0, 0]: the first output of the first call of a layer (kx layers are called once).
json::Value tensor_ref(const std::string& layer, bool with_kwargs) {
  json::Value::Array ref{json::Value(layer), json::Value(0), json::Value(0)};
  if (with_kwargs) ref.emplace_back(json::Value::Object{});
  return json::Value(std::move(ref));
}

// Keras 3's reference to a layer's output of per-sample shape `shape`: {"class_name": "__keras_tensor__",
// "config": {"shape": [null, ...], "dtype": "float32", "keras_history": [layer, 0, 0]}}.
json::Value keras_tensor(const std::string& layer, const Shape& shape) {
  json::Value::Array dims{json::Value()};
  for (int64_t d : shape) dims.emplace_back(d);
  json::Value config{json::Value::Object{}};
  config.set("shape", json::Value(std::move(dims)));
  config.set("dtype", "float32");
  config.set("keras_history", tensor_ref(layer, false));
  json::Value tensor{json::Value::Object{}};
  tensor.set("class_name", "__keras_tensor__");
  tensor.set("config", std::move(config));
  return tensor;
}

Shape input_shape_of(const json::Value& input_layer) {
  const json::Value& config = input_layer.at("config", "InputLayer");
  const json::Value* shape = config.find("batch_shape");
  if (!shape) shape = config.find("batch_input_shape");  // Keras 2's name
  require(shape != nullptr, Status::InvalidArgument, "InputLayer config needs batch_shape");
  const json::Value::Array& dims = shape->as_array("batch_shape");
  require(dims.size() >= 2, Status::InvalidArgument, "InputLayer batch_shape needs a batch and a sample dimension");
  Shape input;
  for (size_t i = 1; i < dims.size(); ++i) input.push_back(dims[i].as_int("batch_shape entry"));
  return input;
}

bool is_input_layer(const json::Value& layer) {
  const json::Value* cls = layer.find("class_name");
  return cls && cls->type() == json::Value::Type::String && cls->as_string("class_name") == "InputLayer";
}

std::string layer_name(const json::Value& layer) {
  if (const json::Value* n = layer.find("name")) return n->as_string("layer name");
  return layer.at("config", "layer").at("name", "layer config").as_string("layer name");
}

// The layer names a call's arguments refer to, in order: Keras 3 writes tensors as objects with a
// "keras_history" [layer, node, index]; Keras 2 as lists [layer, node, index, kwargs].
void collect_refs(const json::Value& v, std::vector<std::string>& out) {
  if (v.type() == json::Value::Type::Object) {
    if (const json::Value* history = v.find("keras_history")) {
      const json::Value::Array& h = history->as_array("keras_history");
      require(!h.empty(), Status::InvalidArgument, "empty keras_history");
      out.push_back(h[0].as_string("keras_history layer"));
      return;
    }
    for (const auto& [key, member] : v.as_object("inbound node")) collect_refs(member, out);
  } else if (v.type() == json::Value::Type::Array) {
    const json::Value::Array& a = v.as_array("inbound node");
    if (a.size() >= 3 && a[0].type() == json::Value::Type::String && a[1].type() == json::Value::Type::Number) {
      out.push_back(a[0].as_string("inbound layer"));
      return;
    }
    for (const json::Value& e : a) collect_refs(e, out);
  }
}

// A layer's call: the layers it reads and its keyword arguments as LayerSpec::call_config.
struct Call {
  std::vector<std::string> inbound;
  std::string call_config;
};

// Keras 3 writes a call as {"args": [...], "kwargs": {...}}: the positional tensors, then those passed
// by keyword (attention_mask=m), which kx gives the layer as further inputs (call_arguments.hpp).
// Keras 2 writes a list of tensor lists [layer, node, index, kwargs], plain kwargs in the fourth entry.
Call read_call(const json::Value& layer, const std::string& name) {
  const json::Value* nodes = layer.find("inbound_nodes");
  require(nodes != nullptr, Status::InvalidArgument, "layer \"" + name + "\" of a Functional config has no inbound_nodes");
  const json::Value::Array& calls = nodes->as_array("inbound_nodes of \"" + name + "\"");
  require(calls.size() == 1, calls.empty() ? Status::InvalidArgument : Status::Unsupported,
          "layer \"" + name + "\" is called " + std::to_string(calls.size()) +
              " times; kx needs every layer but the input called exactly once (no shared layers)");
  const json::Value& call = calls.front();
  Call out;
  const json::Value* kwargs = nullptr;
  if (call.type() == json::Value::Type::Object && call.find("args")) {
    collect_refs(*call.find("args"), out.inbound);
    kwargs = call.find("kwargs");
    if (kwargs && kwargs->type() == json::Value::Type::Object) {
      const json::Value* cls = layer.find("class_name");
      const std::string class_name = cls && cls->type() == json::Value::Type::String ? cls->as_string("class_name") : "";
      core::CallKeywords k = core::split_call_keywords(*kwargs, out.inbound.size(), class_name, "layer \"" + name + "\"");
      out.inbound.insert(out.inbound.end(), k.tensors.begin(), k.tensors.end());
      out.call_config = std::move(k.call_config);
    }
  } else {
    collect_refs(call, out.inbound);
    if (call.type() == json::Value::Type::Array)
      for (const json::Value& ref : call.as_array("inbound node"))
        if (ref.type() == json::Value::Type::Array && ref.as_array("inbound tensor").size() == 4)
          kwargs = &ref.as_array("inbound tensor")[3];
    if (kwargs && kwargs->type() == json::Value::Type::Object) {
      json::Value plain{json::Value::Object{}};
      bool any = false;
      for (const auto& [key, v] : kwargs->as_object("kwargs"))
        if (v.type() != json::Value::Type::Object && v.type() != json::Value::Type::Array) {
          plain.set(key, v);
          any = true;
        }
      if (any) out.call_config = plain.dump();
    }
  }
  require(!out.inbound.empty(), Status::InvalidArgument, "layer \"" + name + "\" has no inputs");
  return out;
}

// The single output layer's name from output_layers: [["name", 0, 0]] or ["name", 0, 0].
std::string output_layer_name(const json::Value& config) {
  const json::Value::Array& outs = config.at("output_layers", "Functional config").as_array("output_layers");
  std::vector<std::string> names;
  collect_refs(json::Value(outs), names);
  require(names.size() == 1, names.empty() ? Status::InvalidArgument : Status::Unsupported,
          "a model needs exactly one output layer, the config names " + std::to_string(names.size()));
  return names.front();
}

Model functional_from_json(const Strategy& strategy, const json::Value& config) {
  const json::Value::Array& layers = config.at("layers", "Functional config").as_array("model layers");
  struct Entry {
    const json::Value* layer;
    std::string name;
    Call call;
  };
  const json::Value* input = nullptr;
  std::string input_name;
  std::vector<Entry> entries;
  for (const json::Value& l : layers) {
    const std::string name = layer_name(l);
    if (is_input_layer(l)) {
      require(input == nullptr, Status::Unsupported, "a model with several inputs is not supported");
      input = &l;
      input_name = name;
      continue;
    }
    entries.push_back({&l, name, read_call(l, name)});
  }
  require(input != nullptr, Status::InvalidArgument, "a Functional config needs an InputLayer");
  require(!entries.empty(), Status::InvalidArgument, "model config has no layers");
  const std::string output = output_layer_name(config);

  // Keras lists layers in a topological order; any other order is accepted too. Among the layers whose
  // inputs are ready, the first listed goes first, so a topological listing keeps its order (and
  // the parameter layout its weights' order).
  Model model = Model::functional(strategy, input_shape_of(*input), input_name);
  std::set<std::string> added{input_name};
  std::vector<bool> done(entries.size(), false);
  for (size_t placed = 0; placed < entries.size(); ++placed) {
    size_t next = entries.size();
    for (size_t i = 0; i < entries.size() && next == entries.size(); ++i)
      if (!done[i] && std::all_of(entries[i].call.inbound.begin(), entries[i].call.inbound.end(),
                                  [&](const std::string& n) { return added.count(n) > 0; }))
        next = i;
    if (next == entries.size()) {
      for (size_t i = 0; i < entries.size(); ++i)
        if (!done[i])
          for (const std::string& n : entries[i].call.inbound)
            require(added.count(n) > 0 || std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == n; }),
                    Status::InvalidArgument, "layer \"" + entries[i].name + "\" reads \"" + n + "\", which the config does not have");
      fail(Status::InvalidArgument, "the layers of the config form a cycle");
    }
    done[next] = true;
    LayerSpec spec = core::layer_spec_from_json(*entries[next].layer);
    spec.name = entries[next].name;
    spec.call_config = entries[next].call.call_config;
    model.add(std::move(spec), entries[next].call.inbound);
    added.insert(entries[next].name);
  }
  // The output must be the last layer: with every layer leading to it, any topological order ends there.
  require(model.layer_names().back() == output, Status::InvalidArgument,
          "layer \"" + model.layer_names().back() + "\" does not lead to the output layer \"" + output + "\"");
  return model;
}

Model sequential_from_json(const Strategy& strategy, const json::Value& config) {
  const json::Value::Array& layers = config.at("layers", "model config").as_array("model layers");
  require(!layers.empty(), Status::InvalidArgument, "model config has no layers");
  require(is_input_layer(layers.front()), Status::InvalidArgument,
          "the first layer of a Sequential config must be an InputLayer");
  Model model = Model::sequential(strategy, input_shape_of(layers.front()));
  for (size_t i = 1; i < layers.size(); ++i) model.add(core::layer_spec_from_json(layers[i]));
  return model;
}

}  // namespace

std::string Model::Impl::to_json() const {
  const bool functional = !net.is_chain();
  json::Value::Array items{input_layer_json(net, functional)};
  for (size_t i = 0; i < net.layers.size(); ++i) {
    json::Value layer = net.layers[i]->to_json();
    if (functional) {
      const core::Layer& l = *net.layers[i];
      json::Value call;
      if (l.inputs_as_arguments()) {
        // Keras 3's form: the inputs as separate arguments (attention(query, value)), and the kwargs.
        // Inputs passed by keyword ({"kx_input": n} in the kwargs) go there as tensors, the rest are args.
        const auto tensor_of = [&](int t) {
          return keras_tensor(t == 0 ? net.input_name : net.layers[static_cast<size_t>(t - 1)]->name(),
                              net.shapes[static_cast<size_t>(t)]);
        };
        json::Value kwargs{json::Value::Object{}};
        std::set<size_t> by_keyword;
        const json::Value call_keywords = l.call_kwargs();
        for (const auto& [key, v] : call_keywords.as_object("kwargs")) {
          const json::Value* index = v.type() == json::Value::Type::Object ? v.find("kx_input") : nullptr;
          if (!index) {
            kwargs.set(key, v);
            continue;
          }
          const size_t n = static_cast<size_t>(index->as_int("kx_input"));
          by_keyword.insert(n);
          kwargs.set(key, tensor_of(net.inputs[i].at(n)));
        }
        json::Value::Array args;
        for (size_t n = 0; n < net.inputs[i].size(); ++n)
          if (!by_keyword.count(n)) args.push_back(tensor_of(net.inputs[i][n]));
        // Self-attention of one input: Keras calls it with the query as the value too.
        if (args.size() == 1) args.push_back(args.front());
        call = json::Value(json::Value::Object{});
        call.set("args", json::Value(std::move(args)));
        call.set("kwargs", std::move(kwargs));
      } else {
        json::Value::Array refs;
        for (int t : net.inputs[i])
          refs.push_back(tensor_ref(t == 0 ? net.input_name : net.layers[static_cast<size_t>(t - 1)]->name(), true));
        call = json::Value(std::move(refs));
      }
      json::Value entry{json::Value::Object{}};
      entry.set("class_name", layer.at("class_name", "layer").as_string("class_name"));
      entry.set("name", l.name());
      entry.set("config", layer.at("config", "layer"));
      entry.set("inbound_nodes", json::Value::Array{std::move(call)});
      layer = std::move(entry);
    }
    items.push_back(std::move(layer));
  }
  json::Value config{json::Value::Object{}};
  config.set("name", functional ? "functional" : "sequential");
  config.set("layers", json::Value(std::move(items)));
  if (functional) {
    config.set("input_layers", json::Value::Array{tensor_ref(net.input_name, false)});
    config.set("output_layers", json::Value::Array{tensor_ref(net.layers.back()->name(), false)});
  }
  json::Value root{json::Value::Object{}};
  root.set("class_name", functional ? "Functional" : "Sequential");
  root.set("config", std::move(config));
  root.set("kx_version", KX_VERSION_STRING);
  return root.dump();
}

Model Model::from_json(const Strategy& strategy, const std::string& text) {
  const json::Value root = json::parse(text);
  const std::string cls = root.at("class_name", "model config").as_string("model class_name");
  const json::Value& config = root.at("config", "model config");
  if (cls == "Sequential") return sequential_from_json(strategy, config);
  if (cls == "Functional" || cls == "Model") return functional_from_json(strategy, config);
  fail(Status::InvalidArgument, "model class \"" + cls + "\" is not supported (Sequential or Functional)");
}

}  // namespace kx
