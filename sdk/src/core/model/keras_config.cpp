#include "core/model/keras_config.hpp"

#include <cmath>
#include <iterator>

#include "core/layers/layer_registry.hpp"
#include "core/layers/tensor_operation.hpp"
#include "core/model/keras_masks.hpp"
#include "kx/error.hpp"

namespace kx::core {

namespace {

using json::Value;

bool is_string(const Value* v) { return v && v->type() == Value::Type::String; }
bool is_null(const Value* v) { return !v || v->is_null(); }

// A copy of object `v` with member `key` replaced by (or appended as) `with`.
Value with_member(const Value& v, const std::string& key, Value with) {
  Value out{Value::Object{}};
  bool replaced = false;
  for (const auto& [k, m] : v.as_object("config")) {
    if (k == key) {
      out.set(k, with);
      replaced = true;
    } else {
      out.set(k, m);
    }
  }
  if (!replaced) out.set(key, std::move(with));
  return out;
}

// The name of a dtype policy as Keras 3 ({"class_name": "DTypePolicy", "config": {"name": ...}}) or
// Keras 2 ("float32") writes it; "" when absent.
std::string policy_name(const Value* dtype, const std::string& what) {
  if (is_null(dtype)) return "";
  if (is_string(dtype)) return dtype->as_string(what);
  const std::string& cls = dtype->at("class_name", what).as_string(what + " dtype class");
  require(cls == "DTypePolicy" || cls == "FloatDTypePolicy" || cls == "Policy", Status::Unsupported,
          what + ": dtype policy " + cls + " (quantized layers cannot be trained by kx)");
  return dtype->at("config", what).at("name", what).as_string(what + " dtype policy");
}

bool all_ones(const Value& v) {
  if (v.type() == Value::Type::Number) return v.as_number("dilation_rate") == 1;
  for (const Value& e : v.as_array("dilation_rate"))
    if (!all_ones(e)) return false;
  return true;
}

// Refuses a layer setting kx would otherwise ignore while Keras trains with it. The layers that read
// their dilation_rate themselves (and refuse what they cannot do) are let through with it.
void check_layer_settings(const Value& config, const std::string& cls, const std::string& what) {
  const bool reads_dilation = cls == "Conv1D" || cls == "Conv2D" || cls == "DepthwiseConv2D" ||
                              cls == "SeparableConv2D" || cls == "Conv2DTranspose";
  for (const auto& entry : config.as_object(what)) {
    // Named references, not structured bindings: clang before 16 (Debian 12's 14, the fuzz build's)
    // cannot capture bindings in the lambdas below.
    const std::string& key = entry.first;
    const Value& v = entry.second;
    const auto refuse = [&] { fail(Status::Unsupported, what + ": attribute " + key + " = " + v.dump() + " is not supported"); };
    // Dropout reads its noise_shape itself (a mask per sample, broadcast over the sample's axes).
    // Regularizers and constraints are refused for every layer config, file or not (layer_spec_from_json).
    if (key == "quantization_config" || (key == "noise_shape" && cls != "Dropout") || key == "renorm_clipping") {
      if (!v.is_null()) refuse();
    } else if (key == "data_format") {
      if (!v.is_null() && v.as_string(what + " data_format") != "channels_last") refuse();
    } else if (key == "dilation_rate") {
      if (!reads_dilation && !all_ones(v)) refuse();
    } else if (key == "groups") {
      if (v.as_number(what + " groups") != 1) refuse();
    } else if (key == "lora_rank") {
      if (!v.is_null() && v.as_number(what + " lora_rank") != 0) refuse();
    } else if (key == "renorm" || key == "synchronized" || key == "sparse" || key == "ragged") {
      if (v.as_bool(what + " " + key)) refuse();
    } else if (key == "activation") {
      // kx's activations by Keras's names; anything else (mish, a serialized function) cannot be trained here.
      if (v.type() != Value::Type::String && !v.is_null()) refuse();
      if (v.type() == Value::Type::String) {
        try {
          (void)activation_from_name(v.as_string(what));
        } catch (const Error&) {
          refuse();
        }
      }
    }
  }
}

// One layer of a Keras model config, checked: Unsupported for what kx lacks.
void check_layer(const Value& layer) {
  const std::string cls = layer.at("class_name", "layer").as_string("layer class_name");
  const Value* config = layer.find("config");
  const Value* name = config ? config->find("name") : nullptr;
  if (!is_string(name)) name = layer.find("name");
  const std::string what = cls + " \"" + (is_string(name) ? name->as_string("name") : std::string("?")) + "\"";
  if (is_keras_operation_node(layer)) {
    (void)operation_spec_from_keras(layer);  // Unsupported naming what kx lacks
    return;
  }
  require(cls == "InputLayer" || find_layer_entry(cls) != nullptr, Status::Unsupported,
          "layer class " + cls + " (" + what + ") is not supported by kx");
  require(config != nullptr, Status::InvalidArgument, what + " has no config");
  check_layer_settings(*config, cls, what);
}

const Value& layers_of(const Value& model) {
  return model.at("config", "model config").at("layers", "model config");
}

}  // namespace

std::string model_config_from_keras(const Value& model) {
  const std::string cls = model.at("class_name", "model config").as_string("model class_name");
  require(cls == "Sequential" || cls == "Functional" || cls == "Model", Status::Unsupported,
          "model class " + cls + " is not supported (Sequential or Functional models only)");
  if (cls != "Sequential") {  // Embedding masks are kx's own: their not_equal nodes go
    const Value functional = without_keras_mask_nodes(model);
    for (const Value& l : layers_of(functional).as_array("model layers")) check_layer(l);
    return functional.dump();
  }
  const Value& config = model.at("config", "model config");
  const Value::Array& layers = layers_of(model).as_array("model layers");
  for (const Value& l : layers) check_layer(l);
  if (layers.empty() || layers.front().at("class_name", "layer").as_string("class_name") == "InputLayer")
    return model.dump();
  // A Keras 2 Sequential: the input shape is the first layer's batch_input_shape (or the model's).
  const Value* shape = layers.front().at("config", "layer").find("batch_input_shape");
  if (is_null(shape)) shape = layers.front().at("config", "layer").find("batch_shape");
  if (is_null(shape)) shape = config.find("build_input_shape");
  require(!is_null(shape), Status::Unsupported, "a Sequential model without an input shape (never built) is not supported");
  Value input_config{Value::Object{}};
  input_config.set("batch_shape", *shape);
  Value input{Value::Object{}};
  input.set("class_name", "InputLayer");
  input.set("config", std::move(input_config));
  Value::Array with_input{std::move(input)};
  with_input.insert(with_input.end(), layers.begin(), layers.end());
  return with_member(model, "config", with_member(config, "layers", Value(std::move(with_input)))).dump();
}

Precision precision_from_keras(const Value& model) {
  std::string shared;
  for (const Value& l : layers_of(model).as_array("model layers")) {
    const Value& config = l.at("config", "layer");
    if (l.at("class_name", "layer").as_string("class_name") == "InputLayer") continue;
    const std::string p = policy_name(config.find("dtype"), "layer " + l.at("class_name", "layer").dump());
    if (p.empty()) continue;
    require(shared.empty() || p == shared, Status::Unsupported,
            "layers with different dtype policies (" + shared + ", " + p + ") are not supported");
    shared = p;
  }
  for (Precision p : {Precision::Float32, Precision::MixedBfloat16, Precision::MixedFloat16})
    if (shared.empty() || shared == precision_name(p)) return shared.empty() ? Precision::Float32 : p;
  fail(Status::Unsupported, "dtype policy " + shared + " is not supported (float32, mixed_float16, mixed_bfloat16)");
}

namespace {

// A number setting of an optimizer or loss that must have this value in kx (null counts as absent).
void require_value(const Value& config, const std::string& key, double expected, const std::string& what) {
  const Value* v = config.find(key);
  if (is_null(v)) return;
  const bool same = v->type() == Value::Type::Bool ? v->as_bool(key) == (expected != 0) : v->as_number(what + " " + key) == expected;
  require(same, Status::Unsupported, what + ": attribute " + key + " = " + v->dump() + " is not supported");
}

void require_absent(const Value& config, const std::string& key, const std::string& what) {
  const Value* v = config.find(key);
  require(is_null(v), Status::Unsupported, what + ": attribute " + key + " = " + (v ? v->dump() : "") + " is not supported");
}

double number_or(const Value& config, const std::string& key, double fallback, const std::string& what) {
  const Value* v = config.find(key);
  return is_null(v) ? fallback : v->as_number(what + " " + key);
}

void read_optimizer(const Value& opt, CompileOptions& o) {
  if (is_string(&opt)) {
    const std::string& n = opt.as_string("optimizer");
    const std::pair<const char*, OptimizerKind> names[] = {
        {"adam", OptimizerKind::Adam}, {"sgd", OptimizerKind::Sgd}, {"adamw", OptimizerKind::AdamW},
        {"rmsprop", OptimizerKind::RmsProp}};
    for (const auto& [name, kind] : names)
      if (n == name) {
        o.optimizer.kind = kind;
        return;
      }
    fail(Status::Unsupported, "optimizer " + n + " is not supported (Adam, AdamW, RMSprop or SGD)");
  }
  const std::string cls = opt.at("class_name", "optimizer").as_string("optimizer class_name");
  const Value& c = opt.at("config", "optimizer " + cls);
  if (cls == "LossScaleOptimizer") {  // Keras's wrapper under mixed_float16
    read_optimizer(c.at("inner_optimizer", cls), o);
    o.initial_loss_scale = number_or(c, "initial_scale", o.initial_loss_scale, cls);
    o.loss_scale_growth_steps = static_cast<int64_t>(number_or(c, "dynamic_growth_steps", 2000, cls));
    return;
  }
  require(cls == "Adam" || cls == "SGD" || cls == "AdamW" || cls == "RMSprop", Status::Unsupported,
          "optimizer " + cls + " is not supported (Adam, AdamW, RMSprop or SGD)");
  const std::string what = "optimizer " + cls;
  o.optimizer.kind = cls == "Adam"    ? OptimizerKind::Adam
                     : cls == "AdamW" ? OptimizerKind::AdamW
                     : cls == "SGD"   ? OptimizerKind::Sgd
                                      : OptimizerKind::RmsProp;
  const Value* lr = c.find("learning_rate");
  if (is_null(lr)) lr = c.find("lr");  // Keras 2
  if (!is_null(lr)) {
    require(lr->type() == Value::Type::Number, Status::Unsupported,
            what + ": a learning-rate schedule (" + lr->dump().substr(0, 80) + ") is not supported");
    o.optimizer.learning_rate = lr->as_number("learning_rate");
  }
  o.optimizer.beta1 = number_or(c, "beta_1", o.optimizer.beta1, what);
  o.optimizer.beta2 = number_or(c, "beta_2", o.optimizer.beta2, what);
  o.optimizer.epsilon = number_or(c, "epsilon", o.optimizer.epsilon, what);
  o.optimizer.momentum = number_or(c, "momentum", 0, what);
  if (const Value* ema = c.find("use_ema"); !is_null(ema)) o.optimizer.use_ema = ema->as_bool("use_ema");
  o.optimizer.ema_momentum = number_or(c, "ema_momentum", o.optimizer.ema_momentum, what);
  // AdamW's decoupled weight decay (Keras gives every optimizer one; kx, AdamW's only).
  if (o.optimizer.kind == OptimizerKind::AdamW)
    o.optimizer.weight_decay = number_or(c, "weight_decay", o.optimizer.weight_decay, what);
  else
    require_value(c, "weight_decay", 0, what);
  require_value(c, "decay", 0, what);
  if (o.optimizer.kind == OptimizerKind::RmsProp) {
    o.optimizer.rho = number_or(c, "rho", o.optimizer.rho, what);
    if (const Value* centered = c.find("centered"); !is_null(centered)) o.optimizer.centered = centered->as_bool("centered");
  }
  for (const char* key : {"amsgrad", "nesterov"}) require_value(c, key, 0, what);
  for (const char* key : {"clipnorm", "clipvalue", "global_clipnorm", "ema_overwrite_frequency", "loss_scale_factor"})
    require_absent(c, key, what);
  require_value(c, "gradient_accumulation_steps", 1, what);
}

LossKind loss_kind(const std::string& name) {
  if (name == "mse" || name == "MeanSquaredError" || name == "mean_squared_error") return LossKind::MeanSquaredError;
  if (name == "mae" || name == "MeanAbsoluteError" || name == "mean_absolute_error") return LossKind::MeanAbsoluteError;
  if (name == "Huber" || name == "huber" || name == "huber_loss") return LossKind::Huber;
  if (name == "SparseCategoricalCrossentropy") return LossKind::SparseCategoricalCrossentropy;
  if (name == "CategoricalCrossentropy") return LossKind::CategoricalCrossentropy;
  if (name == "BinaryCrossentropy") return LossKind::BinaryCrossentropy;
  for (int k = 0; k < kLossKindCount; ++k)
    if (name == loss_name(static_cast<LossKind>(k))) return static_cast<LossKind>(k);
  fail(Status::Unsupported, "loss " + name + " is not supported (sparse_categorical_crossentropy, "
                            "categorical_crossentropy, binary_crossentropy, mean_squared_error, mean_absolute_error, "
                            "huber)");
}

void read_loss(const Value& loss, CompileOptions& o) {
  if (is_string(&loss)) {
    o.loss.kind = loss_kind(loss.as_string("loss"));
    return;
  }
  require(loss.type() == Value::Type::Object, Status::Unsupported,
          "a loss per output (" + loss.dump().substr(0, 80) + ") is not supported: kx models have one output");
  const std::string cls = loss.at("class_name", "loss").as_string("loss class_name");
  const Value& c = loss.at("config", "loss " + cls);
  if (cls == "function") {  // a loss function serialized by Keras 3: its name is the config
    o.loss.kind = loss_kind(c.as_string("loss function"));
    return;
  }
  o.loss.kind = loss_kind(cls);
  const std::string what = "loss " + cls;
  if (const Value* fl = c.find("from_logits"); !is_null(fl)) o.loss.from_logits = fl->as_bool("from_logits");
  if (const Value* delta = c.find("delta"); !is_null(delta) && o.loss.kind == LossKind::Huber)
    o.loss.huber_delta = delta->as_number("Huber delta");
  require_value(c, "label_smoothing", 0, what);
  require_value(c, "axis", -1, what);
  require_absent(c, "ignore_class", what);
  if (const Value* r = c.find("reduction"); !is_null(r)) {
    const std::string& red = r->as_string("reduction");
    require(red == "sum_over_batch_size" || red == "auto", Status::Unsupported, what + ": reduction " + red + " is not supported");
  }
}

// Whether a metric is one of Keras's accuracies that kx tracks as "accuracy".
bool read_metric(const Value& m) {
  std::string name;
  if (is_string(&m))
    name = m.as_string("metric");
  else if (m.type() == Value::Type::Array) {
    bool any = false;
    for (const Value& e : m.as_array("metrics")) any = read_metric(e) || any;
    return any;
  } else
    name = m.at("class_name", "metric").as_string("metric class_name");
  for (const char* known : {"accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy",
                            "SparseCategoricalAccuracy", "CategoricalAccuracy", "BinaryAccuracy"})
    if (name == known) return true;
  fail(Status::Unsupported, "metric " + name + " is not supported (kx tracks accuracy)");
}

}  // namespace

std::optional<CompileOptions> compile_options_from_keras(const Value& c, Precision precision) {
  // Keras writes {} (3.x) or null for a model it never compiled.
  if (c.is_null() || (c.type() == Value::Type::Object && c.as_object("compile config").empty())) return std::nullopt;
  CompileOptions o;
  o.precision = precision;
  const Value* opt = c.find("optimizer");
  if (is_null(opt)) opt = c.find("optimizer_config");  // a legacy training_config
  require(!is_null(opt), Status::InvalidArgument, "the compile config names no optimizer");
  read_optimizer(*opt, o);
  const Value* loss = c.find("loss");
  require(!is_null(loss), Status::Unsupported, "a model compiled without a loss is not supported");
  read_loss(*loss, o);
  if (const Value* m = c.find("metrics"); !is_null(m)) o.accuracy = read_metric(*m);
  require_absent(c, "loss_weights", "compile");
  if (const Value* w = c.find("weighted_metrics"); !is_null(w))
    require(w->type() == Value::Type::Array && w->as_array("weighted_metrics").empty(), Status::Unsupported,
            "compile: weighted_metrics are not supported");
  return o;
}

namespace {

Value policy(const std::string& name) {
  Value config{Value::Object{}};
  config.set("name", name);
  Value p{Value::Object{}};
  p.set("module", "keras");
  p.set("class_name", "DTypePolicy");
  p.set("config", std::move(config));
  p.set("registered_name", nullptr);
  return p;
}

Value flat_ref(const Value& refs) {
  const Value::Array& a = refs.as_array("tensor refs");
  return a.size() == 1 && a.front().type() == Value::Type::Array ? a.front() : refs;
}

}  // namespace

Value keras_model_config(const Value& kx_model, const std::string& dtype_policy, const std::vector<int>& keras_order,
                         const std::map<std::string, Shape>& output_shapes) {
  const std::string cls = kx_model.at("class_name", "model").as_string("class_name");
  const Value& config = kx_model.at("config", "model");
  const Value::Array& layers = config.at("layers", "model").as_array("layers");
  // Keras lists a functional model's layers (and keeps their weights) in its own order: the input,
  // then keras_order (indices of the layers after the input).
  std::vector<size_t> order{0};
  for (int i : keras_order) order.push_back(static_cast<size_t>(i) + 1);
  Value::Array out_layers;
  for (size_t i : order) {
    const Value& l = layers.at(i);
    if (l.at("class_name", "layer").as_string("class_name") == "TensorOperation") {  // Keras's operation node
      out_layers.push_back(keras_operation_node(l, output_shapes));
      continue;
    }
    const bool input = l.at("class_name", "layer").as_string("class_name") == "InputLayer";
    Value layer{Value::Object{}};
    layer.set("module", "keras.layers");
    for (const auto& [k, v] : l.as_object("layer")) {
      if (k == "config") {
        Value c = with_member(v, "dtype", input ? Value("float32") : policy(dtype_policy));
        layer.set(k, std::move(c));
      } else {
        layer.set(k, v);
      }
    }
    layer.set("registered_name", nullptr);
    out_layers.push_back(std::move(layer));
  }
  Value out_config{Value::Object{}};
  out_config.set("name", config.at("name", "model").as_string("name"));
  out_config.set("trainable", true);
  out_config.set("dtype", policy(dtype_policy));
  out_config.set("layers", Value(std::move(out_layers)));
  if (const Value* in = config.find("input_layers")) out_config.set("input_layers", flat_ref(*in));
  if (const Value* out = config.find("output_layers")) out_config.set("output_layers", flat_ref(*out));
  Value root{Value::Object{}};
  // Where Keras imports the class from: keras.Sequential; Functional only from its own module.
  root.set("module", cls == "Sequential" ? "keras" : "keras.src.models.functional");
  root.set("class_name", cls);
  root.set("config", std::move(out_config));
  root.set("registered_name", nullptr);
  return root;
}

Value keras_compile_config(const CompileOptions& o, const OptimizerConfig& r) {
  const bool adam = r.adam_family();
  static constexpr const char* kNames[] = {"adam", "SGD", "adamw", "rmsprop"};       // by OptimizerKind
  static constexpr const char* kOptimizers[] = {"Adam", "SGD", "AdamW", "RMSprop"};  // Keras's classes
  Value oc{Value::Object{}};
  oc.set("name", kNames[static_cast<int>(r.kind)]);
  oc.set("learning_rate", Value::real(*r.learning_rate));
  if (r.kind == OptimizerKind::AdamW)
    oc.set("weight_decay", Value::real(r.weight_decay));
  else
    oc.set("weight_decay", nullptr);
  oc.set("clipnorm", nullptr);
  oc.set("global_clipnorm", nullptr);
  oc.set("clipvalue", nullptr);
  oc.set("use_ema", r.use_ema);
  oc.set("ema_momentum", Value::real(r.ema_momentum));
  oc.set("ema_overwrite_frequency", nullptr);
  oc.set("loss_scale_factor", nullptr);
  oc.set("gradient_accumulation_steps", nullptr);
  if (adam) {
    oc.set("beta_1", Value::real(r.beta1));
    oc.set("beta_2", Value::real(r.beta2));
    oc.set("epsilon", Value::real(r.epsilon));
    oc.set("amsgrad", false);
  } else if (r.kind == OptimizerKind::RmsProp) {
    oc.set("rho", Value::real(r.rho));
    oc.set("momentum", Value::real(r.momentum));
    oc.set("epsilon", Value::real(r.epsilon));
    oc.set("centered", r.centered);
  } else {
    oc.set("momentum", Value::real(r.momentum));
    oc.set("nesterov", false);
  }
  Value opt{Value::Object{}};
  opt.set("module", "keras.optimizers");
  opt.set("class_name", kOptimizers[static_cast<int>(r.kind)]);
  opt.set("config", std::move(oc));
  opt.set("registered_name", nullptr);
  static constexpr const char* kClasses[] = {"SparseCategoricalCrossentropy", "CategoricalCrossentropy",
                                             "BinaryCrossentropy", "MeanSquaredError", "MeanAbsoluteError", "Huber"};
  static_assert(static_cast<int>(std::size(kClasses)) == kLossKindCount, "a Keras class name per loss");
  const bool regression = o.loss.kind == LossKind::MeanSquaredError || o.loss.kind == LossKind::MeanAbsoluteError ||
                          o.loss.kind == LossKind::Huber;
  Value lc{Value::Object{}};
  lc.set("name", loss_name(o.loss.kind));
  lc.set("reduction", "sum_over_batch_size");
  if (!regression) lc.set("from_logits", o.loss.from_logits);
  if (o.loss.kind == LossKind::Huber) lc.set("delta", Value::real(o.loss.huber_delta));
  Value loss{Value::Object{}};
  loss.set("module", "keras.losses");
  loss.set("class_name", kClasses[static_cast<int>(o.loss.kind)]);
  loss.set("config", std::move(lc));
  loss.set("registered_name", nullptr);
  Value c{Value::Object{}};
  c.set("optimizer", std::move(opt));
  c.set("loss", std::move(loss));
  c.set("loss_weights", nullptr);
  c.set("metrics", o.accuracy ? Value(Value::Array{Value("accuracy")}) : Value());
  c.set("weighted_metrics", nullptr);
  c.set("run_eagerly", false);
  c.set("steps_per_execution", 1);
  c.set("jit_compile", false);
  return c;
}

}  // namespace kx::core
