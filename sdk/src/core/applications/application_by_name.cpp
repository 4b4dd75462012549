// Applications by Keras's class name with Keras's keyword arguments as JSON: one entry for C and the
// bindings that every future application reaches without a new function.
#include <string>

#include "io/json.hpp"
#include "kx/applications.hpp"
#include "kx/error.hpp"

namespace kx::applications {
namespace {

using json::Value;

Shape shape_of(const Value& v, const std::string& what) {
  Shape s;
  for (const Value& d : v.as_array(what)) s.push_back(d.as_int(what));
  require(s.size() == 3, Status::InvalidArgument, what + " needs 3 values (height, width, channels)");
  return s;
}

// Every key of `options` must be one of `known`: a misspelt argument is an error, not a default.
void require_known(const Value& options, std::initializer_list<const char*> known, const std::string& app) {
  for (const auto& [key, v] : options.as_object(app + " options")) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    require(found, Status::InvalidArgument, app + ": unknown argument \"" + key + "\"");
    if (key == "weights")
      require(v.is_null(), Status::Unsupported,
              app + ": weights must be null (load Keras's weight files with kx_model_load_weights)");
  }
}

// "MobileNetV2 alpha": what an error names. One function, not a concatenation at each use.
std::string argument(const std::string& app, const char* key) { return app + " " + key; }

// The arguments the mobile applications share (MobileNetV2, MobileNetV3*, EfficientNetB0), as
// references to the members each options struct has with Keras's defaults: one function for all three.
struct TopAndShape {
  Shape& input_shape;
  bool& include_top;
  std::string& pooling;
  int64_t& classes;
  std::string& classifier_activation;
};

void read_top_and_shape(const Value& options, const std::string& name, TopAndShape o) {
  if (const Value* v = options.find("input_shape")) o.input_shape = shape_of(*v, argument(name, "input_shape"));
  if (const Value* v = options.find("include_top")) o.include_top = v->as_bool(argument(name, "include_top"));
  if (const Value* v = options.find("pooling"); v && !v->is_null()) o.pooling = v->as_string(argument(name, "pooling"));
  if (const Value* v = options.find("classes")) o.classes = v->as_int(argument(name, "classes"));
  if (const Value* v = options.find("classifier_activation"))
    o.classifier_activation = v->is_null() ? "linear" : v->as_string(argument(name, "classifier_activation"));
}

template <class Options>
TopAndShape top_and_shape(Options& o) {
  return {o.input_shape, o.include_top, o.pooling, o.classes, o.classifier_activation};
}

}  // namespace

Model application(const Strategy& strategy, const std::string& name, const std::string& options_json) {
  const Value options = options_json.empty() ? Value(Value::Object{}) : json::parse(options_json);
  if (name == "ResNet50") {
    require_known(options, {"include_top", "weights", "input_shape", "classes"}, name);
    const Value* shape = options.find("input_shape");
    const Value* top = options.find("include_top");
    const Value* classes = options.find("classes");
    return resnet50(strategy, shape ? shape_of(*shape, argument(name, "input_shape")) : Shape{224, 224, 3},
                    top ? top->as_bool(argument(name, "include_top")) : true,
                    classes ? classes->as_int(argument(name, "classes")) : 1000);
  }
  if (name == "MobileNetV2") {
    require_known(options,
                  {"alpha", "include_top", "weights", "input_shape", "pooling", "classes", "classifier_activation"},
                  name);
    MobileNetV2Options o;
    if (const Value* v = options.find("alpha")) o.alpha = v->as_number(argument(name, "alpha"));
    read_top_and_shape(options, name, top_and_shape(o));
    return mobilenet_v2(strategy, o);
  }
  if (name == "MobileNetV3Small" || name == "MobileNetV3Large") {
    require_known(options,
                  {"alpha", "minimalistic", "include_top", "weights", "input_shape", "pooling", "classes", "dropout_rate",
                   "classifier_activation", "include_preprocessing"},
                  name);
    MobileNetV3Options o;
    o.large = name == "MobileNetV3Large";
    if (const Value* v = options.find("alpha")) o.alpha = v->as_number(argument(name, "alpha"));
    if (const Value* v = options.find("minimalistic")) o.minimalistic = v->as_bool(argument(name, "minimalistic"));
    read_top_and_shape(options, name, top_and_shape(o));
    if (const Value* v = options.find("dropout_rate")) o.dropout_rate = v->as_number(argument(name, "dropout_rate"));
    if (const Value* v = options.find("include_preprocessing"))
      o.include_preprocessing = v->as_bool(argument(name, "include_preprocessing"));
    return mobilenet_v3(strategy, o);
  }
  if (name == "EfficientNetB0") {
    require_known(options, {"include_top", "weights", "input_shape", "pooling", "classes", "classifier_activation"},
                  name);
    EfficientNetOptions o;
    read_top_and_shape(options, name, top_and_shape(o));
    return efficientnet_b0(strategy, o);
  }
  fail(Status::InvalidArgument,
       "unknown application \"" + name +
           "\" (ResNet50, MobileNetV2, MobileNetV3Small, MobileNetV3Large, EfficientNetB0)");
}

}  // namespace kx::applications
