#include "core/model/call_arguments.hpp"

#include "kx/error.hpp"

namespace kx::core {

using json::Value;

namespace {

// The keywords a layer class takes as tensors (beyond these, Keras's layers in kx take none).
bool takes_tensor_keyword(const std::string& cls, const std::string& key) {
  return cls == "MultiHeadAttention" && (key == "key" || key == "attention_mask");
}

}  // namespace

bool is_keras_tensor(const Value& v) {
  if (v.type() != Value::Type::Object) return false;
  const Value* config = v.find("config");
  return config && config->type() == Value::Type::Object && config->find("keras_history") != nullptr;
}

CallKeywords split_call_keywords(const Value& kwargs, size_t first_input, const std::string& cls,
                                 const std::string& what) {
  CallKeywords out;
  Value kept{Value::Object{}};
  bool any = false;
  for (const auto& [key, v] : kwargs.as_object(what + " kwargs")) {
    if (is_keras_tensor(v)) {
      require(takes_tensor_keyword(cls, key), Status::Unsupported,
              what + ": the keyword argument " + key + " given as a tensor is not supported");
      const Value::Array& history = v.at("config", what).at("keras_history", what).as_array(what + " keras_history");
      require(!history.empty(), Status::InvalidArgument, what + ": keyword argument " + key + " has an empty keras_history");
      Value index{Value::Object{}};
      index.set("kx_input", static_cast<int64_t>(first_input + out.tensors.size()));
      out.tensors.push_back(history.front().as_string(what + " " + key + " keras_history"));
      kept.set(key, std::move(index));
      any = true;
    } else if (v.type() != Value::Type::Object && v.type() != Value::Type::Array) {
      kept.set(key, v);
      any = true;
    }
  }
  if (any) out.call_config = kept.dump();
  return out;
}

int call_keyword_input(const Value& call_config, const std::string& key, const std::string& what) {
  const Value* v = call_config.find(key);
  if (!v || v->is_null()) return -1;
  const Value* index = v->type() == Value::Type::Object ? v->find("kx_input") : nullptr;
  require(index != nullptr, Status::InvalidArgument,
          what + ": keyword argument " + key + " must be a tensor (a layer's output), got " + v->dump());
  const int64_t n = index->as_int(what + " " + key);
  require(n >= 0 && n < 64, Status::InvalidArgument, what + ": keyword argument " + key + " input " + std::to_string(n));
  return static_cast<int>(n);
}

}  // namespace kx::core
