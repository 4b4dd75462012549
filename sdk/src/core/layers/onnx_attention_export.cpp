#include "core/layers/onnx_attention_export.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace kx::core {

using io::OnnxAttribute;

namespace {

constexpr int64_t kOnnxBool = 9;  // TensorProto.DataType BOOL, Cast's `to`

// An input projection: which input, its heads' width, how [N, steps, heads, dim] is transposed for the
// products, and the names of its constants and values.
struct Projection {
  size_t input;
  int64_t dim;
  int64_t perm[4];
  const char *kernel, *bias, *projected, *biased, *heads, *by_head;
};

}  // namespace

void export_attention_onnx(OnnxLayerExport& e, const OnnxAttention& a) {
  const int64_t H = a.heads, tq = e.input_shape(0)[0];
  const size_t value_input = a.attended_inputs > 1 ? 1 : 0, key_input = a.attended_inputs > 2 ? 2 : value_input;
  const int64_t tv = e.input_shape(value_input)[0];
  // Keras scales the projected query by 1 / sqrt(key_dim): here its kernel and bias are.
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.key_dim)));
  const Projection projections[] = {
      {0, a.key_dim, {0, 2, 1, 3}, "query/kernel", "query/bias", "/query/projected", "/query", "/query/heads",
       "/query/by_head"},  // [N, H, tq, key_dim]
      {key_input, a.key_dim, {0, 2, 3, 1}, "key/kernel", "key/bias", "/key/projected", "/key", "/key/heads",
       "/key/by_head"},  // [N, H, key_dim, tv]
      {value_input, a.value_dim, {0, 2, 1, 3}, "value/kernel", "value/bias", "/value/projected", "/value",
       "/value/heads", "/value/by_head"}};
  size_t next_weight = 0;
  std::string by_head[3];
  for (int i = 0; i < 3; ++i) {
    const Projection& pr = projections[i];
    const int64_t steps = e.input_shape(pr.input)[0], in = e.input_shape(pr.input)[1];
    std::vector<float> kernel = e.weights()[next_weight++];
    // Without use_bias a zero bias: the same sums.
    std::vector<float> bias = a.use_bias ? e.weights()[next_weight++] : std::vector<float>(static_cast<size_t>(H * pr.dim));
    if (i == 0)
      for (std::vector<float>* v : {&kernel, &bias})
        for (float& w : *v) w *= scale;
    e.step("MatMul", {e.input_plain(pr.input), e.constant(pr.kernel, {in, H * pr.dim}, std::move(kernel))}, pr.projected);
    e.step("Add", {pr.projected, e.constant(pr.bias, {H * pr.dim}, std::move(bias))}, pr.biased);
    e.reshape(pr.biased, pr.heads, {-1, steps, H, pr.dim});
    by_head[i] = e.transpose(pr.heads, pr.by_head, {pr.perm, pr.perm + 4});
  }
  std::string scores = e.step("MatMul", {by_head[0], by_head[1]}, "/scores");  // [N, H, tq, tv]
  // Masked: above the diagonal with use_causal_mask (query step i does not see value steps j > i), and
  // where the attention_mask is 0; a masked score is replaced. Keras adds its -1e9 above the diagonal
  // where it has no attention_mask, which is the same: the diagonal's score stays, so each masked
  // position's softmax is exactly 0 either way.
  std::string masked;
  if (a.causal) {
    std::vector<float> future(static_cast<size_t>(tq * tv), 0.0f);
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = i + 1; j < tv; ++j) future[static_cast<size_t>(i * tv + j)] = 1.0f;
    masked = e.step("Cast", {e.constant("future_steps", {tq, tv}, std::move(future))}, "/future",
                    {OnnxAttribute::integer("to", kOnnxBool)});
  }
  if (a.mask_input) {
    e.step("Equal", {e.input_plain(static_cast<size_t>(a.attended_inputs)), e.constant("zero", {1}, {0.0f})},
           "/mask_zero");
    const std::string zero = e.step("Unsqueeze", {"/mask_zero", e.constant_ints("head_axis", {1}, {1})},
                                    "/mask_zero_heads");  // [N, 1, tq, tv]
    masked = masked.empty() ? zero : e.step("Or", {zero, masked}, "/masked");
  }
  if (!masked.empty())
    scores = e.step("Where", {masked, e.constant("masked_score", {1}, {a.masked_score}), scores}, "/masked_scores");
  std::string attention = e.step("Softmax", {scores}, "/attention", {OnnxAttribute::integer("axis", -1)});
  if (a.zero_masked_attention) attention = e.step("Where", {masked, "/zero", attention}, "/masked_attention");
  e.step("MatMul", {attention, by_head[2]}, "/heads_output");  // [N, H, tq, value_dim]
  e.transpose("/heads_output", "/heads_side_by_side", {0, 2, 1, 3});
  e.reshape("/heads_side_by_side", "/concat", {-1, tq, H * a.value_dim});
  std::vector<float> bias = a.use_bias ? e.weights()[next_weight + 1] : std::vector<float>(static_cast<size_t>(a.output_dim));
  e.step("MatMul", {"/concat", e.constant("attention_output/kernel", {H * a.value_dim, a.output_dim},
                                          e.weights()[next_weight])},
         "/output_projected");
  e.output(e.step("Add", {"/output_projected", e.constant("attention_output/bias", {a.output_dim}, std::move(bias))},
                  "/output"),
           false);
}

}  // namespace kx::core
