#include "core/layers/multi_head_attention_settings.hpp"

#include <cmath>
#include <string>

#include "core/checked_size.hpp"
#include "core/model/call_arguments.hpp"
#include "io/json.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

// The single size of output_shape (an int or a one-entry list), or 0 for null.
int64_t output_dim_of(const json::Value& v, const std::string& what) {
  if (v.is_null()) return 0;
  if (v.type() == json::Value::Type::Array) {
    const json::Value::Array& dims = v.as_array(what);
    require(dims.size() == 1, Status::Unsupported, what + " " + v.dump() + ": only one output axis is supported");
    return checked_dimension(dims.front().as_int(what), 1, what);
  }
  return checked_dimension(v.as_int(what), 1, what);
}

}  // namespace

AttentionSettings read_attention_settings(const LayerSpec& spec) {
  const std::string what = "MultiHeadAttention \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs num_heads and key_dim");
  const json::Value config = json::parse(spec.config);
  AttentionSettings s;
  s.heads = checked_dimension(config.at("num_heads", what).as_int(what + " num_heads"), 1, what + " num_heads");
  s.key_dim = checked_dimension(config.at("key_dim", what).as_int(what + " key_dim"), 1, what + " key_dim");
  s.value_dim = s.key_dim;
  if (const json::Value* v = config.find("value_dim"); v && !v->is_null())
    s.value_dim = checked_dimension(v->as_int(what + " value_dim"), 1, what + " value_dim");
  if (const json::Value* v = config.find("output_shape")) s.output_dim = output_dim_of(*v, what + " output_shape");
  if (const json::Value* v = config.find("dropout")) s.dropout = v->as_number(what + " dropout");
  require(std::isfinite(s.dropout) && s.dropout >= 0 && s.dropout < 1, Status::InvalidArgument,
          what + " dropout must be in [0, 1)");
  if (const json::Value* v = config.find("use_bias")) s.use_bias = v->as_bool(what + " use_bias");
  if (const json::Value* v = config.find("use_gate"))
    require(!v->as_bool(what + " use_gate"), Status::Unsupported, what + ": use_gate is not supported");
  if (const json::Value* v = config.find("sliding_window"))
    require(v->is_null(), Status::Unsupported, what + ": sliding_window is not supported");
  if (const json::Value* v = config.find("attention_axes"); v && !v->is_null()) {
    // Over the steps axis (1, or -2 for sequences): the only axis a sequence has.
    const bool steps = v->type() == json::Value::Type::Array
                           ? v->as_array(what).size() == 1 &&
                                 (v->as_array(what).front().as_int(what) == 1 || v->as_array(what).front().as_int(what) == -2)
                           : (v->as_int(what) == 1 || v->as_int(what) == -2);
    require(steps, Status::Unsupported, what + ": attention_axes " + v->dump() + " is not supported, only the steps axis");
  }
  if (!spec.call_config.empty()) {
    const json::Value call = json::parse(spec.call_config);
    if (const json::Value* v = call.find("use_causal_mask"); v && !v->is_null())
      s.causal = v->as_bool(what + " use_causal_mask");
    if (const json::Value* v = call.find("return_attention_scores"); v && !v->is_null())
      require(!v->as_bool(what), Status::Unsupported, what + ": return_attention_scores is not supported");
    s.mask_input = call_keyword_input(call, "attention_mask", what);
    // key by keyword is the third input, as the positional key is.
    const int key = call_keyword_input(call, "key", what);
    require(key < 0 || key == 2, Status::Unsupported, what + ": key passed by keyword needs query and value before it");
    for (const char* k : {"query_mask", "value_mask", "key_mask", "query", "value"})
      if (const json::Value* v = call.find(k); v && !v->is_null())
        fail(Status::Unsupported, what + ": the call's keyword argument " + k + " is not supported");
  }
  return s;
}

}  // namespace kx::core
