#include "core/layer.hpp"

#include <cmath>

#include "kx/error.hpp"

namespace kx::core {

std::unique_ptr<Layer> make_dense_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_flatten_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_dropout_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_conv2d_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_max_pooling2d_layer(const LayerSpec& spec);

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) {
  switch (spec.kind) {
    case LayerKind::Dense: return make_dense_layer(spec);
    case LayerKind::Flatten: return make_flatten_layer(spec);
    case LayerKind::Dropout: return make_dropout_layer(spec);
    case LayerKind::Conv2D: return make_conv2d_layer(spec);
    case LayerKind::MaxPooling2D: return make_max_pooling2d_layer(spec);
  }
  fail(Status::Internal, "unknown layer kind");
}

json::Value Layer::to_json() const {
  json::Value config{json::Value::Object{}};
  config.set("name", spec_.name);
  add_config(config);
  json::Value out{json::Value::Object{}};
  out.set("class_name", class_name());
  out.set("config", std::move(config));
  return out;
}

namespace {

// [a, b] or a single number a (Keras accepts both for sizes and strides).
std::pair<int64_t, int64_t> pair_of(const json::Value& v, const std::string& what) {
  if (v.type() == json::Value::Type::Number) return {v.as_int(what), v.as_int(what)};
  const json::Value::Array& a = v.as_array(what);
  require(a.size() == 2, Status::InvalidArgument, what + " needs 2 values");
  return {a[0].as_int(what), a[1].as_int(what)};
}

Padding padding_from(const std::string& s, const std::string& what) {
  if (s == "valid") return Padding::Valid;
  if (s == "same") return Padding::Same;
  fail(Status::InvalidArgument, what + ": unknown padding \"" + s + "\" (valid or same)");
}

}  // namespace

LayerSpec layer_spec_from_json(const json::Value& v) {
  const std::string cls = v.at("class_name", "layer").as_string("layer class_name");
  const json::Value& config = v.at("config", "layer \"" + cls + "\"");
  config.as_object("config of layer \"" + cls + "\"");
  LayerSpec spec;
  if (const json::Value* name = config.find("name")) spec.name = name->as_string(cls + " name");
  const std::string what = cls + " \"" + spec.name + "\"";
  if (cls == "Dense") {
    spec.kind = LayerKind::Dense;
    spec.units = config.at("units", what).as_int(what + " units");
    if (const json::Value* act = config.find("activation"))
      spec.activation = act->is_null() ? Activation::None : activation_from_name(act->as_string(what + " activation"));
    if (const json::Value* bias = config.find("use_bias"))
      require(bias->as_bool(what + " use_bias"), Status::Unsupported, what + ": use_bias false is not supported");
  } else if (cls == "Flatten") {
    spec.kind = LayerKind::Flatten;
  } else if (cls == "Dropout") {
    spec.kind = LayerKind::Dropout;
    spec.rate = static_cast<float>(config.at("rate", what).as_number(what + " rate"));
  } else if (cls == "Conv2D") {
    spec.kind = LayerKind::Conv2D;
    spec.filters = config.at("filters", what).as_int(what + " filters");
    const auto [kh, kw] = pair_of(config.at("kernel_size", what), what + " kernel_size");
    spec.kernel_h = kh;
    spec.kernel_w = kw;
    if (const json::Value* s = config.find("strides")) {
      const auto [sh, sw] = pair_of(*s, what + " strides");
      require(sh == sw, Status::Unsupported, what + ": different strides along height and width are not supported");
      spec.stride = sh;
    }
    if (const json::Value* p = config.find("padding")) spec.padding = padding_from(p->as_string(what + " padding"), what);
    if (const json::Value* act = config.find("activation"))
      spec.activation = act->is_null() ? Activation::None : activation_from_name(act->as_string(what + " activation"));
    if (const json::Value* bias = config.find("use_bias"))
      require(bias->as_bool(what + " use_bias"), Status::Unsupported, what + ": use_bias false is not supported");
  } else if (cls == "MaxPooling2D") {
    spec.kind = LayerKind::MaxPooling2D;
    const auto [ph, pw] = pair_of(config.at("pool_size", what), what + " pool_size");
    spec.pool_h = ph;
    spec.pool_w = pw;
    if (const json::Value* s = config.find("strides"); s && !s->is_null()) {
      const auto [sh, sw] = pair_of(*s, what + " strides");
      require(sh == ph && sw == pw, Status::Unsupported, what + ": strides other than the pool size are not supported");
    }
    if (const json::Value* p = config.find("padding"))
      require(padding_from(p->as_string(what + " padding"), what) == Padding::Valid, Status::Unsupported,
              what + ": only \"valid\" padding is supported for pooling");
  } else {
    fail(Status::InvalidArgument, "unknown layer class \"" + cls + "\"");
  }
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
  }
  return "?";
}

Activation activation_from_name(const std::string& name) {
  if (name == "linear" || name == "none") return Activation::None;
  if (name == "relu") return Activation::Relu;
  if (name == "sigmoid") return Activation::Sigmoid;
  if (name == "tanh") return Activation::Tanh;
  if (name == "softmax") return Activation::Softmax;
  fail(Status::InvalidArgument, "unknown activation \"" + name + "\"");
}

}  // namespace kx
