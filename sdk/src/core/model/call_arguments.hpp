// The tensors a Keras 3 call passes by keyword (attention(q, v, attention_mask=m)): kx hands them to
// the layer as further inputs after the positional ones, and keeps in the layer's call config which
// input each keyword is.
#pragma once
#include <string>
#include <vector>

#include "io/json.hpp"

namespace kx::core {

// Whether v is a Keras 3 tensor reference ({"class_name": "__keras_tensor__", "config": {...,
// "keras_history": [layer, node, index]}}).
bool is_keras_tensor(const json::Value& v);

struct CallKeywords {
  std::vector<std::string> tensors;  // the layers whose outputs the tensor keywords are, in order
  std::string call_config;           // for LayerSpec::call_config; "" when there is nothing to keep
};

// A call's kwargs split: plain values are kept as they are; each tensor becomes {"kx_input": n}, n
// counting on from first_input (the positional inputs' count), and its layer is appended to tensors.
// Objects and lists that are no tensors are left out. A tensor keyword that class `cls` does not take
// (only MultiHeadAttention's key and attention_mask) is Unsupported naming it.
CallKeywords split_call_keywords(const json::Value& kwargs, size_t first_input, const std::string& cls,
                                 const std::string& what);

// The input index a tensor keyword of a call config refers to, or -1 when the keyword is absent or
// null; InvalidArgument for anything that is no {"kx_input": n}.
int call_keyword_input(const json::Value& call_config, const std::string& key, const std::string& what);

}  // namespace kx::core
