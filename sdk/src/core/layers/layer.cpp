#include "core/layers/layer.hpp"

#include <cmath>

#include "kx/error.hpp"

namespace kx::core {

std::unique_ptr<Layer> make_dense_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_flatten_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_dropout_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_conv2d_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_max_pooling2d_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_average_pooling2d_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_global_average_pooling2d_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_zero_padding2d_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_batch_normalization_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_add_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_concatenate_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_activation_layer(const LayerSpec& spec);
std::unique_ptr<Layer> make_normalization_layer(const LayerSpec& spec);

std::unique_ptr<Layer> make_layer(const LayerSpec& spec) {
  switch (spec.kind) {
    case LayerKind::Dense: return make_dense_layer(spec);
    case LayerKind::Flatten: return make_flatten_layer(spec);
    case LayerKind::Dropout: return make_dropout_layer(spec);
    case LayerKind::Conv2D: return make_conv2d_layer(spec);
    case LayerKind::MaxPooling2D: return make_max_pooling2d_layer(spec);
    case LayerKind::AveragePooling2D: return make_average_pooling2d_layer(spec);
    case LayerKind::GlobalAveragePooling2D: return make_global_average_pooling2d_layer(spec);
    case LayerKind::ZeroPadding2D: return make_zero_padding2d_layer(spec);
    case LayerKind::BatchNormalization: return make_batch_normalization_layer(spec);
    case LayerKind::Add: return make_add_layer(spec);
    case LayerKind::Concatenate: return make_concatenate_layer(spec);
    case LayerKind::Activation: return make_activation_layer(spec);
    case LayerKind::Normalization: return make_normalization_layer(spec);
  }
  fail(Status::Internal, "unknown layer kind");
}

void require_last_axis(const LayerSpec& spec, const Shape& in, const char* class_name) {
  require(spec.axis == -1 || spec.axis == static_cast<int64_t>(in.size()), Status::Unsupported,
          std::string(class_name) + " layer \"" + spec.name + "\": axis " + std::to_string(spec.axis) +
              " is not supported, only the last (channels) axis (-1 or " + std::to_string(in.size()) + ")");
}

Shape Layer::build_inputs(const std::vector<Shape>& inputs) {
  require(inputs.size() == 1, Status::InvalidArgument,
          std::string(class_name()) + " layer \"" + name() + "\" takes one input, not " + std::to_string(inputs.size()));
  return build(inputs.front());
}

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

// [a, b] or a single number a (Keras accepts both for sizes and strides).
std::pair<int64_t, int64_t> pair_of(const json::Value& v, const std::string& what) {
  if (v.type() == json::Value::Type::Number) return {v.as_int(what), v.as_int(what)};
  const json::Value::Array& a = v.as_array(what);
  require(a.size() == 2, Status::InvalidArgument, what + " needs 2 values");
  return {a[0].as_int(what), a[1].as_int(what)};
}

// A number or an array of numbers (Normalization's statistics), as float32.
std::vector<float> floats_of(const json::Value& v, const std::string& what) {
  if (v.type() == json::Value::Type::Number) return {static_cast<float>(v.as_number(what))};
  std::vector<float> out;
  for (const json::Value& e : v.as_array(what)) out.push_back(static_cast<float>(e.as_number(what)));
  return out;
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
  if (const json::Value* t = config.find("trainable")) spec.trainable = t->as_bool(what + " trainable");
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
  } else if (cls == "MaxPooling2D" || cls == "AveragePooling2D") {
    spec.kind = cls == "MaxPooling2D" ? LayerKind::MaxPooling2D : LayerKind::AveragePooling2D;
    const auto [ph, pw] = pair_of(config.at("pool_size", what), what + " pool_size");
    spec.pool_h = ph;
    spec.pool_w = pw;
    if (const json::Value* s = config.find("strides"); s && !s->is_null()) {
      const auto [sh, sw] = pair_of(*s, what + " strides");
      spec.pool_stride_h = sh;
      spec.pool_stride_w = sw;
    }
    if (const json::Value* p = config.find("padding"))
      require(padding_from(p->as_string(what + " padding"), what) == Padding::Valid, Status::Unsupported,
              what + ": only \"valid\" padding is supported for pooling");
  } else if (cls == "GlobalAveragePooling2D") {
    spec.kind = LayerKind::GlobalAveragePooling2D;
    if (const json::Value* k = config.find("keepdims"))
      require(!k->as_bool(what + " keepdims"), Status::Unsupported, what + ": keepdims true is not supported");
  } else if (cls == "ZeroPadding2D") {
    spec.kind = LayerKind::ZeroPadding2D;
    const json::Value& p = config.at("padding", what);
    // An int, (symmetric_h, symmetric_w) or ((top, bottom), (left, right)), as Keras.
    if (p.type() == json::Value::Type::Number) {
      spec.pad_top = spec.pad_bottom = spec.pad_left = spec.pad_right = p.as_int(what + " padding");
    } else {
      const json::Value::Array& a = p.as_array(what + " padding");
      require(a.size() == 2, Status::InvalidArgument, what + " padding needs 2 entries");
      const auto [top, bottom] = pair_of(a[0], what + " padding");
      const auto [left, right] = pair_of(a[1], what + " padding");
      spec.pad_top = top;
      spec.pad_bottom = bottom;
      spec.pad_left = left;
      spec.pad_right = right;
    }
  } else if (cls == "BatchNormalization") {
    spec.kind = LayerKind::BatchNormalization;
    if (const json::Value* axis = config.find("axis")) spec.axis = axis->as_int(what + " axis");
    if (const json::Value* m = config.find("momentum")) spec.momentum = static_cast<float>(m->as_number(what + " momentum"));
    if (const json::Value* e = config.find("epsilon")) spec.epsilon = static_cast<float>(e->as_number(what + " epsilon"));
    for (const char* flag : {"center", "scale"})
      if (const json::Value* f = config.find(flag))
        require(f->as_bool(what + " " + flag), Status::Unsupported, what + ": " + flag + " false is not supported");
  } else if (cls == "Add") {
    spec.kind = LayerKind::Add;
  } else if (cls == "Concatenate") {
    spec.kind = LayerKind::Concatenate;
    if (const json::Value* axis = config.find("axis")) spec.axis = axis->as_int(what + " axis");
  } else if (cls == "Activation") {
    spec.kind = LayerKind::Activation;
    const json::Value& act = config.at("activation", what);
    spec.activation = act.is_null() ? Activation::None : activation_from_name(act.as_string(what + " activation"));
  } else if (cls == "Normalization") {
    spec.kind = LayerKind::Normalization;
    if (const json::Value* axis = config.find("axis")) spec.axis = axis->as_int(what + " axis");
    if (const json::Value* invert = config.find("invert"))
      require(!invert->as_bool(what + " invert"), Status::Unsupported, what + ": invert true is not supported");
    spec.mean = floats_of(config.at("mean", what), what + " mean");
    spec.variance = floats_of(config.at("variance", what), what + " variance");
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
