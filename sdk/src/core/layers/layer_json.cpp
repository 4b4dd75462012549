#include "core/layers/layer_json.hpp"

#include "kx/error.hpp"

namespace kx::core {

std::pair<int64_t, int64_t> size_pair_from_json(const json::Value& v, const std::string& what) {
  if (v.type() == json::Value::Type::Number) return {v.as_int(what), v.as_int(what)};
  const json::Value::Array& a = v.as_array(what);
  require(a.size() == 2, Status::InvalidArgument, what + " needs 2 values");
  return {a[0].as_int(what), a[1].as_int(what)};
}

int64_t size_from_json(const json::Value& v, const std::string& what) {
  if (v.type() == json::Value::Type::Number) return v.as_int(what);
  const json::Value::Array& a = v.as_array(what);
  require(a.size() == 1, Status::InvalidArgument, what + " needs 1 value");
  return a[0].as_int(what);
}

Padding padding_from_name(const std::string& name, const std::string& what) {
  if (name == "valid") return Padding::Valid;
  if (name == "same") return Padding::Same;
  fail(Status::InvalidArgument, what + ": unknown padding \"" + name + "\" (valid or same)");
}

Activation activation_from_json(const json::Value& v, const std::string& what) {
  return v.is_null() ? Activation::None : activation_from_name(v.as_string(what));
}

bool global_pooling_keepdims(const LayerSpec& spec, const char* class_name) {
  bool keepdims = false;
  if (spec.config.empty()) return keepdims;
  const json::Value config = json::parse(spec.config);
  const std::string what = std::string(class_name) + " \"" + spec.name + "\"";
  if (const json::Value* k = config.find("keepdims")) keepdims = k->as_bool(what + " keepdims");
  if (const json::Value* f = config.find("data_format"); f && !f->is_null())
    require(f->as_string(what + " data_format") == "channels_last", Status::Unsupported,
            what + ": only data_format \"channels_last\" is supported");
  return keepdims;
}

}  // namespace kx::core
