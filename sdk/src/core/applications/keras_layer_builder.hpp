// Building an application as Keras's code builds it: each layer from its Keras config, named as Keras
// names it (explicit names, or Keras's per-class counters for layers and operations it leaves unnamed:
// re_lu, re_lu_1, add, multiply ...), so that a model built here has Keras's layer names and Keras's
// weight files load into it by name.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/json.hpp"
#include "kx/model.hpp"

namespace kx::applications {

class KerasLayerBuilder {
 public:
  explicit KerasLayerBuilder(Model& m) : m_(m) {}

  // Keras's automatic name for an unnamed layer or operation of this snake-case class: stem, stem_1 ...
  std::string auto_name(const std::string& stem) {
    const int n = counters_[stem]++;
    return n == 0 ? stem : stem + "_" + std::to_string(n);
  }

  // Adds the layer of class `cls` with `config` and `name`, reading `from`; returns its name.
  std::string add(const std::string& cls, const std::string& name, json::Value::Object config,
                  const std::vector<std::string>& from) {
    json::Value c{std::move(config)};
    c.set("name", name);
    json::Value layer{json::Value::Object{}};
    layer.set("class_name", cls);
    layer.set("config", std::move(c));
    return m_.add_layer(layer.dump(), from);
  }

  // The tail of an application without its top: Keras's global pooling ("avg" or "max", named as the
  // application names it) after `from`, or nothing for no pooling.
  void pooling_tail(const std::string& pooling, const std::string& from, const std::string& avg_name,
                    const std::string& max_name) {
    if (pooling == "avg") add("GlobalAveragePooling2D", avg_name, {}, {from});
    if (pooling == "max") add("GlobalMaxPooling2D", max_name, {}, {from});
  }

  // Keras's x op constant (constant_first: constant op x), an operation node Keras names by its class.
  std::string operation(const std::string& op, const std::string& stem, const std::string& from, double constant,
                        bool constant_first = false) {
    json::Value::Array args{json::Value(), json::Value(constant)};
    if (constant_first) std::swap(args[0], args[1]);
    return add("TensorOperation", auto_name(stem),
               {{"operation", json::Value(op)}, {"arguments", json::Value(std::move(args))}}, {from});
  }

 private:
  Model& m_;
  std::map<std::string, int> counters_;
};

}  // namespace kx::applications
