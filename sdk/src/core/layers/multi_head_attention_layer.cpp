// MultiHeadAttention, as keras.layers.MultiHeadAttention over sequences [steps, features]: called with
// (query, value) or (query, value, key) (key = value when absent); one input is self-attention. Per
// head h: Q = query Wq[:, h] + bq[h] scaled by 1 / sqrt(key_dim) (Keras scales the query), K and V
// alike, P = softmax(Q K^T) (plus Keras's large negative number above the diagonal with the call's
// use_causal_mask), dropout on P in training, O = P V, and y = concat_h(O) Wo + bo.
//
// The call's attention_mask (a tensor [steps_q, steps_v] of the graph, the layer's last input; a
// position attends where it is not 0), use_causal_mask and the Keras masks of the query, value and key
// (attention_keras_mask.hpp; the output carries the query's) combine as Keras ANDs them. Keras then
// replaces each masked score: by -0.7 * 3.38953e38 in its fused path (dropout 0), where a row with
// every position masked attends uniformly; by its Softmax's -1e9 with dropout, where such a row's
// attention is then zero. kx does the same per path.
//
// Tensors keep Keras's layouts: projections [samples, steps, heads, dim] (one GEMM each, the kernel
// (features, heads, dim) being a [features, heads * dim] matrix), scores [samples, heads, steps_q,
// steps_v]; the per-head products are batched GEMMs with two strides (sample, head). Weights in
// Keras's order and names: query/kernel, query/bias, key/..., value/..., attention_output/kernel
// (heads, value_dim, output), attention_output/bias; in Keras's files under query_dense/, key_dense/,
// value_dense/ and output_dense/.
#include <algorithm>
#include <cmath>

#include "core/checked_size.hpp"
#include "core/layers/attention_keras_mask.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "core/layers/onnx_attention_export.hpp"
#include "core/model/call_arguments.hpp"
#include "core/layers/multi_head_attention_settings.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

using backend::BatchedGemm;
using backend::Epilogue;
using backend::Trans;

class MultiHeadAttentionLayer final : public Layer {
 public:
  MultiHeadAttentionLayer(const LayerSpec& spec, AttentionSettings s)
      : Layer(spec), s_(s), kernel_init_(keras_initializer_setting(spec, "kernel_initializer")),
        bias_init_(keras_initializer_setting(spec, "bias_initializer")) {}

  Shape build(const Shape& in) override { return build_inputs({in}); }

  Shape build_inputs(const std::vector<Shape>& inputs) override {
    const std::string what = "MultiHeadAttention layer \"" + name() + "\"";
    std::vector<Shape> attended = inputs;
    if (s_.mask_input >= 0) {
      require(static_cast<size_t>(s_.mask_input) + 1 == inputs.size() && s_.mask_input >= 1, Status::InvalidArgument,
              what + ": attention_mask must be the last of its " + std::to_string(inputs.size()) +
                  " inputs, after the query, not input " + std::to_string(s_.mask_input));
      attended.pop_back();
    }
    require(!attended.empty() && attended.size() <= 3, Status::InvalidArgument,
            what + " takes query, value and optionally key, not " + std::to_string(attended.size()) + " inputs");
    for (const Shape& in : attended)
      require(in.size() == 2 && in[0] > 0 && in[1] > 0, Status::InvalidArgument,
              what + " needs sequences [steps, features], got " + to_string(in));
    num_inputs_ = static_cast<int>(attended.size());
    const Shape& query = attended[0];
    const Shape& value = attended.size() > 1 ? attended[1] : query;
    const Shape& key = attended.size() > 2 ? attended[2] : value;
    require(key[0] == value[0], Status::InvalidArgument,
            what + ": key and value need the same steps, got " + to_string(key) + " and " + to_string(value));
    tq_ = query[0];
    tv_ = value[0];
    dq_ = query[1];
    dv_ = value[1];
    dk_ = key[1];
    dout_ = s_.output_dim ? s_.output_dim : dq_;
    if (s_.mask_input >= 0)
      require(inputs.back() == Shape{tq_, tv_}, Status::InvalidArgument,
              what + ": attention_mask needs the shape [query steps, value steps] " + to_string(Shape{tq_, tv_}) +
                  ", got " + to_string(inputs.back()));
    // Every size the layer allocates, checked for overflow once here.
    checked_product({std::max(dq_, std::max(dk_, dv_)), s_.heads, std::max(s_.key_dim, s_.value_dim)}, what + "'s kernels");
    checked_product({s_.heads, s_.value_dim, dout_}, what + "'s output kernel");
    checked_product({s_.heads, tq_, tv_, 3}, what + "'s scores");
    return {tq_, dout_};
  }

  std::vector<ParamSpec> params() const override {
    const int64_t H = s_.heads, K = s_.key_dim, V = s_.value_dim;
    std::vector<ParamSpec> p;
    // Keras's EinsumDense gives a VarianceScaling kernel its einsum's axes: a projection's (in, heads,
    // dim) has fans in and heads * dim, the output's (heads, dim, out) heads * dim and out.
    const std::string in_kernel = with_fan_axes(kernel_init_, "[0]", "[1, 2]");
    const auto projection = [&](const char* stem, const char* group, int64_t in, int64_t dim) {
      p.push_back({std::string(stem) + "/kernel", {in, H, dim}, Init::GlorotUniform, in, H * dim, true, {},
                   std::string(group) + "/vars/0", in_kernel});
      if (s_.use_bias)
        p.push_back({std::string(stem) + "/bias", {H, dim}, Init::Zeros, 0, 0, true, {}, std::string(group) + "/vars/1",
                     bias_init_});
    };
    projection("query", "query_dense", dq_, K);
    projection("key", "key_dense", dk_, K);
    projection("value", "value_dense", dv_, V);
    p.push_back({"attention_output/kernel", {H, V, dout_}, Init::GlorotUniform, H * V, dout_, true, {},
                 "output_dense/vars/0", with_fan_axes(kernel_init_, "[0, 1]", "[2]")});
    if (s_.use_bias)
      p.push_back({"attention_output/bias", {dout_}, Init::Zeros, 0, 0, true, {}, "output_dense/vars/1", bias_init_});
    return p;
  }

  // Kept from forward to backward: the projections, the attention (and its dropout mask and the
  // dropped attention) and the heads' outputs.
  int64_t scratch_per_sample() const override {
    return q_size() + k_size() + v_size() + (dropout_on() ? 3 : 1) * p_size() + o_size();
  }
  // Backward's gradients of the heads' outputs, attention and projections; then the Keras masks' AND.
  int64_t workspace_floats_on(const backend::Backend&, int64_t rows) const override {
    return checked_product({rows, o_size() + p_size() + v_size() + q_size() + k_size() + keras_mask_size()},
                           "MultiHeadAttention layer \"" + name() + "\"'s workspace");
  }
  void take_input_masks(const std::vector<int>& sources) override {
    keras_masked_ = false;
    for (int k = 0; k < num_inputs_; ++k) keras_masked_ = keras_masked_ || sources[static_cast<size_t>(k)] >= 0;
  }
  bool passes_mask() const override { return true; }  // Keras sets the query's mask on the output
  bool backward_reads_output() const override { return false; }
  bool rounds_output(bool) const override { return true; }
  bool inputs_as_arguments() const override { return true; }
  json::Value call_kwargs() const override {
    json::Value kwargs{json::Value::Object{}};
    if (s_.causal) kwargs.set("use_causal_mask", true);
    if (s_.mask_input >= 0) {
      json::Value input{json::Value::Object{}};
      input.set("kx_input", static_cast<int64_t>(s_.mask_input));
      kwargs.set("attention_mask", std::move(input));
    }
    return kwargs;
  }

  void forward(const LayerContext& c) const override {
    const Buffers b = buffers(c);
    const Weights w = weights(c.w);
    const Inputs x = inputs(c);
    const int64_t H = s_.heads, K = s_.key_dim, V = s_.value_dim, rows = c.rows;
    project(c, x.query, tq_, dq_, w.wq, w.bq, H * K, b.q);
    project(c, x.key, tv_, dk_, w.wk, w.bk, H * K, b.k);
    project(c, x.value, tv_, dv_, w.wv, w.bv, H * V, b.v);
    const float scale = inv_sqrt_key_dim();
    c.be->scale_shift(rows * q_size(), scale, 0.0f, b.q, b.q);
    round(c, rows * q_size(), b.q);
    c.be->gemm_batched(scores_gemm(rows, Trans::No, Trans::Yes, K, H * K, H * K, 0.0f, c.rounding), b.q, b.k, b.p);
    const Masks mask = masks(c, c.workspace);
    if (mask.any())
      fill_masked(c, mask, masked_score(), b.p);
    else if (s_.causal)
      c.be->causal_mask_add(rows * H, tq_, tv_, kMaskedScore, b.p);
    c.be->activation_forward(Activation::Softmax, rows * H * tq_, tv_, b.p);
    // Keras's Softmax path (dropout on) zeroes masked positions: a row masked throughout attends nowhere.
    if (mask.any() && dropout_on()) fill_masked(c, mask, 0.0f, b.p);
    round(c, rows * p_size(), b.p);
    const float* attention = b.p;
    if (dropout_on() && c.training) {
      c.be->dropout_forward(static_cast<float>(s_.dropout), c.step_seed, c.seed_stream, c.first_row * p_size(),
                            rows * p_size(), b.p, b.mask, b.dropped);
      round(c, rows * p_size(), b.dropped);  // scaled by 1 / (1 - rate): a 16-bit GEMM operand again
      attention = b.dropped;
    }
    // O [samples, steps_q, heads, V] = P V per sample and head.
    BatchedGemm pv = per_head(rows, tq_, V, tv_, c.rounding);
    pv.lda = tv_, pv.a_outer = p_size(), pv.a_inner = tq_ * tv_;
    pv.ldb = H * V, pv.b_outer = v_size(), pv.b_inner = V;
    pv.ldc = H * V, pv.c_outer = o_size(), pv.c_inner = V;
    c.be->gemm_batched(pv, attention, b.v, b.o);
    Epilogue ep{w.bo};
    ep.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::No, rows * tq_, dout_, H * V, b.o, H * V, w.wo, dout_, 0.0f, c.y, dout_, ep);
  }

  void backward(const LayerContext& c) const override {
    const Buffers b = buffers(c);
    const Weights w = weights(c.w);
    const Inputs x = inputs(c);
    const int64_t H = s_.heads, K = s_.key_dim, V = s_.value_dim, rows = c.rows;
    float* d_o = c.workspace;
    float* d_p = d_o + rows * o_size();
    float* d_v = d_p + rows * p_size();
    float* d_q = d_v + rows * v_size();
    float* d_k = d_q + rows * q_size();
    const bool dropped = dropout_on() && c.training;
    const float* attention = dropped ? b.dropped : b.p;
    Grads g = grads(c.dw);
    // The output projection.
    if (c.dw) param_grad(c, b.o, rows * tq_, H * V, c.dy, dout_, g.wo, g.bo);
    Epilogue plain;
    plain.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::Yes, rows * tq_, H * V, dout_, c.dy, dout_, w.wo, dout_, 0.0f, d_o, H * V, plain);
    // dP = dO V^T and dV = P^T dO, per sample and head.
    BatchedGemm dp = scores_gemm(rows, Trans::No, Trans::Yes, V, H * V, H * V, 0.0f, c.rounding);
    dp.a_outer = o_size(), dp.a_inner = V, dp.b_outer = v_size(), dp.b_inner = V;
    c.be->gemm_batched(dp, d_o, b.v, d_p);
    BatchedGemm dv = per_head(rows, tv_, V, tq_, c.rounding);
    dv.ta = Trans::Yes, dv.lda = tv_, dv.a_outer = p_size(), dv.a_inner = tq_ * tv_;
    dv.ldb = H * V, dv.b_outer = o_size(), dv.b_inner = V;
    dv.ldc = H * V, dv.c_outer = v_size(), dv.c_inner = V;
    c.be->gemm_batched(dv, attention, d_o, d_v);
    if (dropped) c.be->multiply(rows * p_size(), d_p, b.mask, d_p);
    const Masks mask = masks(c, d_k + rows * k_size());
    if (mask.any() && dropout_on()) fill_masked(c, mask, 0.0f, d_p);
    c.be->activation_backward(Activation::Softmax, rows * H * tq_, tv_, b.p, d_p, d_p);
    // A replaced score has no gradient (a row masked throughout has a uniform, not a zero, softmax).
    if (mask.any()) fill_masked(c, mask, 0.0f, d_p);
    // Keras casts the mask to bool: nothing flows back into it.
    if (mask.attention && c.dxs && c.dxs[s_.mask_input])
      c.be->fill_zero(static_cast<size_t>(rows * tq_ * tv_) * sizeof(float), c.dxs[s_.mask_input]);
    round(c, rows * p_size(), d_p);
    // dQ = dS K and dK = dS^T Q (Q as scaled), per sample and head; then dQ through the scale.
    BatchedGemm dq = per_head(rows, tq_, K, tv_, c.rounding);
    dq.lda = tv_, dq.a_outer = p_size(), dq.a_inner = tq_ * tv_;
    dq.ldb = H * K, dq.b_outer = k_size(), dq.b_inner = K;
    dq.ldc = H * K, dq.c_outer = q_size(), dq.c_inner = K;
    c.be->gemm_batched(dq, d_p, b.k, d_q);
    BatchedGemm dk = per_head(rows, tv_, K, tq_, c.rounding);
    dk.ta = Trans::Yes, dk.lda = tv_, dk.a_outer = p_size(), dk.a_inner = tq_ * tv_;
    dk.ldb = H * K, dk.b_outer = q_size(), dk.b_inner = K;
    dk.ldc = H * K, dk.c_outer = k_size(), dk.c_inner = K;
    c.be->gemm_batched(dk, d_p, b.q, d_k);
    c.be->scale_shift(rows * q_size(), inv_sqrt_key_dim(), 0.0f, d_q, d_q);
    round(c, rows * q_size(), d_q);
    // The input projections: their weights' gradients, then each input's (a sum where inputs coincide).
    if (c.dw) {
      param_grad(c, x.query, rows * tq_, dq_, d_q, H * K, g.wq, g.bq);
      param_grad(c, x.key, rows * tv_, dk_, d_k, H * K, g.wk, g.bk);
      param_grad(c, x.value, rows * tv_, dv_, d_v, H * V, g.wv, g.bv);
    }
    float* dquery = c.dxs ? c.dxs[0] : c.dx;
    float* dvalue = num_inputs_ > 1 ? c.dxs[1] : dquery;
    float* dkey = num_inputs_ > 2 ? c.dxs[2] : dvalue;
    input_grad(c, d_q, tq_, dq_, H * K, w.wq, dquery, false);
    input_grad(c, d_v, tv_, dv_, H * V, w.wv, dvalue, num_inputs_ == 1);
    input_grad(c, d_k, tv_, dk_, H * K, w.wk, dkey, num_inputs_ < 3);
  }

  // MatMul, Softmax, Reshape and Transpose nodes (onnx_attention_export.hpp), with this forward's masks.
  void export_onnx(OnnxLayerExport& e) const override {
    // kx attends only where Keras's masks allow; the exported graph would attend everywhere.
    if (keras_masked_)
      e.not_exportable("a Keras mask reaches its query, value or key (Embedding mask_zero): the exported "
                       "attention would not apply it");
    OnnxAttention a;
    a.heads = s_.heads, a.key_dim = s_.key_dim, a.value_dim = s_.value_dim, a.output_dim = dout_;
    a.attended_inputs = num_inputs_;
    a.use_bias = s_.use_bias;
    a.causal = s_.causal;
    a.mask_input = s_.mask_input >= 0;
    a.masked_score = a.mask_input ? masked_score() : kMaskedScore;  // causal alone: Keras's -1e9
    a.zero_masked_attention = a.mask_input && dropout_on();
    export_attention_onnx(e, a);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("num_heads", s_.heads);
    config.set("key_dim", s_.key_dim);
    config.set("value_dim", s_.value_dim);
    config.set("dropout", s_.dropout);
    config.set("use_bias", s_.use_bias);
    config.set("output_shape", s_.output_dim ? json::Value(json::Value::Array{json::Value(s_.output_dim)}) : json::Value());
    config.set("attention_axes", json::Value(json::Value::Array{json::Value(1)}));
    add_keras_initializer(config, "kernel_initializer", kernel_init_);
    add_keras_initializer(config, "bias_initializer", bias_init_);
  }

 private:
  // What Keras's softmax adds at a masked position (its _large_negative_number for float32).
  static constexpr float kMaskedScore = -1e9f;
  // What Keras's fused attention (TensorFlow's dot_product_attention) puts there: -0.7 times float32's
  // largest value as Keras spells it.
  static constexpr float kFusedMaskedScore = static_cast<float>(-0.7 * 3.38953e38);
  float masked_score() const { return dropout_on() ? kMaskedScore : kFusedMaskedScore; }

  // The call's attention_mask and the AND of the inputs' Keras masks (made at `at`), each null for none.
  struct Masks {
    const float *attention, *keras;
    bool any() const { return attention || keras; }
  };
  Masks masks(const LayerContext& c, float* at) const {
    Masks m{s_.mask_input >= 0 ? c.xs[s_.mask_input] : nullptr, nullptr};
    if (keras_masked_ && c.masks) {
      const float* query = c.masks[0];
      const float* value = num_inputs_ > 1 ? c.masks[1] : query;
      m.keras = attention_keras_mask(*c.be, c.rows, tq_, tv_, query, value, num_inputs_ > 2 ? c.masks[2] : nullptr, at);
    }
    return m;
  }
  // scores = value where either mask (or use_causal_mask) masks them.
  void fill_masked(const LayerContext& c, const Masks& m, float value, float* scores) const {
    const int causal = s_.causal ? 1 : 0;
    if (m.attention) c.be->attention_mask_fill(c.rows, s_.heads, tq_, tv_, m.attention, causal, value, scores);
    if (m.keras) c.be->attention_mask_fill(c.rows, s_.heads, tq_, tv_, m.keras, causal, value, scores);
  }

  struct Buffers {
    float *q, *k, *v, *p, *mask, *dropped, *o;
  };
  struct Weights {
    const float *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
  };
  struct Grads {
    float *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
  };
  struct Inputs {
    const float *query, *value, *key;
  };

  int64_t q_size() const { return tq_ * s_.heads * s_.key_dim; }
  int64_t k_size() const { return tv_ * s_.heads * s_.key_dim; }
  int64_t v_size() const { return tv_ * s_.heads * s_.value_dim; }
  int64_t p_size() const { return s_.heads * tq_ * tv_; }
  int64_t o_size() const { return tq_ * s_.heads * s_.value_dim; }
  int64_t keras_mask_size() const { return keras_masked_ ? tq_ * tv_ : 0; }
  bool dropout_on() const { return s_.dropout > 0; }
  float inv_sqrt_key_dim() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s_.key_dim))); }

  Buffers buffers(const LayerContext& c) const {
    Buffers b{};
    float* at = c.scratch;
    const auto take = [&](int64_t per_sample) {
      float* p = at;
      at += c.rows * per_sample;
      return p;
    };
    b.q = take(q_size());
    b.k = take(k_size());
    b.v = take(v_size());
    b.p = take(p_size());
    b.mask = dropout_on() ? take(p_size()) : nullptr;
    b.dropped = dropout_on() ? take(p_size()) : nullptr;
    b.o = take(o_size());
    return b;
  }

  // The parameters in params() order; the biases null without use_bias.
  template <class Ptr, class Out>
  Out split(Ptr w) const {
    const int64_t H = s_.heads, K = s_.key_dim, V = s_.value_dim;
    Out o{};
    const auto take = [&](int64_t n) {
      Ptr p = w;
      w += n;
      return p;
    };
    o.wq = take(dq_ * H * K);
    o.bq = s_.use_bias ? take(H * K) : nullptr;
    o.wk = take(dk_ * H * K);
    o.bk = s_.use_bias ? take(H * K) : nullptr;
    o.wv = take(dv_ * H * V);
    o.bv = s_.use_bias ? take(H * V) : nullptr;
    o.wo = take(H * V * dout_);
    o.bo = s_.use_bias ? take(dout_) : nullptr;
    return o;
  }
  Weights weights(const float* w) const { return split<const float*, Weights>(w); }
  Grads grads(float* dw) const { return dw ? split<float*, Grads>(dw) : Grads{}; }

  Inputs inputs(const LayerContext& c) const {
    Inputs x{};
    x.query = c.xs[0];
    x.value = num_inputs_ > 1 ? c.xs[1] : x.query;
    x.key = num_inputs_ > 2 ? c.xs[2] : x.value;
    return x;
  }

  // A GEMM per sample and head of M x N x K, the rest of the strides set by the caller.
  BatchedGemm per_head(int64_t rows, int64_t M, int64_t N, int64_t K, backend::Rounding r) const {
    BatchedGemm g;
    g.M = M, g.N = N, g.K = K;
    g.outer = rows, g.inner = s_.heads;
    g.rounding = r;
    return g;
  }
  // Into the scores' layout [samples, heads, steps_q, steps_v], from two [samples, steps, heads, dim]
  // tensors (the first of steps_q, the second of steps_v) with dim `dim` and rows of lda / ldb.
  BatchedGemm scores_gemm(int64_t rows, Trans ta, Trans tb, int64_t dim, int64_t lda, int64_t ldb, float beta,
                          backend::Rounding r) const {
    BatchedGemm g = per_head(rows, tq_, tv_, dim, r);
    g.ta = ta, g.tb = tb, g.lda = lda, g.ldb = ldb, g.ldc = tv_, g.beta = beta;
    g.a_outer = q_size(), g.a_inner = dim, g.b_outer = k_size(), g.b_inner = dim;
    g.c_outer = p_size(), g.c_inner = tq_ * tv_;
    return g;
  }

  // out [rows * steps, width] = x [rows * steps, in] W + b.
  void project(const LayerContext& c, const float* x, int64_t steps, int64_t in, const float* w, const float* bias,
               int64_t width, float* out) const {
    Epilogue ep{bias};
    ep.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::No, c.rows * steps, width, in, x, in, w, width, 0.0f, out, width, ep);
  }
  // dW = x^T dz and db = column sums of dz, for a projection of n positions.
  void param_grad(const LayerContext& c, const float* x, int64_t n, int64_t in, const float* dz, int64_t width,
                  float* dw, float* db) const {
    Epilogue ep;
    ep.bias_grad = db;
    ep.rounding = c.rounding;
    c.be->gemm(Trans::Yes, Trans::No, in, width, n, x, in, dz, width, 0.0f, dw, width, ep);
  }
  // dx (+)= dz W^T; accumulate onto what an earlier projection of the same input wrote.
  void input_grad(const LayerContext& c, const float* dz, int64_t steps, int64_t in, int64_t width, const float* w,
                  float* dx, bool accumulate) const {
    if (!dx) return;
    Epilogue ep;
    ep.rounding = c.rounding;
    c.be->gemm(Trans::No, Trans::Yes, c.rows * steps, in, width, dz, width, w, width, accumulate ? 1.0f : 0.0f, dx, in,
               ep);
  }
  void round(const LayerContext& c, int64_t n, float* v) const {
    if (c.rounding != backend::Rounding::None) c.be->round_to(c.rounding, n, v, v);
  }

  AttentionSettings s_;
  std::string kernel_init_, bias_init_;  // Keras's kernel_initializer and bias_initializer, "" for the defaults
  int num_inputs_ = 1;
  bool keras_masked_ = false;  // a Keras mask reaches the query, value or key
  int64_t tq_ = 0, tv_ = 0, dq_ = 0, dv_ = 0, dk_ = 0, dout_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_multi_head_attention_layer(const LayerSpec& spec) {
  return std::make_unique<MultiHeadAttentionLayer>(spec, read_attention_settings(spec));
}

}  // namespace kx::core
