// Embedding, as keras.layers.Embedding: integer ids (the model's input as int32 or int64 arrays, held
// exactly as floats) pick rows of `embeddings` [input_dim, output_dim]; the output is the input's
// shape plus output_dim. With mask_zero, id 0 masks its time step for the layers after it (an LSTM).
// An id outside [0, input_dim) fails the step with InvalidArgument on the CPU (as TensorFlow's CPU
// gather); on a GPU it reads zeros, never outside the table (as TensorFlow's GPU gather).
#include <string>
#include <vector>

#include "core/checked_size.hpp"
#include "core/layers/keras_initializer.hpp"
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

struct EmbeddingSettings {
  int64_t input_dim = 0, output_dim = 0;
  bool mask_zero = false;
};

int64_t positive_size(const json::Value& config, const char* key, const std::string& what) {
  const json::Value* v = config.find(key);
  require(v != nullptr, Status::InvalidArgument, what + " needs " + key);
  const double d = v->as_number(what + " " + key);
  require(d >= 1 && d <= 1e12 && d == static_cast<double>(static_cast<int64_t>(d)), Status::InvalidArgument,
          what + " " + key + " must be a positive integer, got " + v->dump());
  return static_cast<int64_t>(d);
}

EmbeddingSettings read_settings(const LayerSpec& spec) {
  const std::string what = "Embedding \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs input_dim and output_dim");
  const json::Value config = json::parse(spec.config);
  EmbeddingSettings s;
  s.input_dim = positive_size(config, "input_dim", what);
  s.output_dim = positive_size(config, "output_dim", what);
  // Ids are held as float32: beyond 2^24 not every integer is one.
  require(s.input_dim <= (int64_t{1} << 24), Status::Unsupported,
          what + " input_dim " + std::to_string(s.input_dim) + " is beyond 2^24, the ids kx holds exactly");
  if (const json::Value* v = config.find("mask_zero")) s.mask_zero = v->as_bool(what + " mask_zero");
  if (const json::Value* v = config.find("sparse"); v && !v->is_null())
    require(!v->as_bool(what + " sparse"), Status::Unsupported, what + ": sparse gradients are not supported");
  return s;
}

class EmbeddingLayer final : public Layer {
 public:
  EmbeddingLayer(const LayerSpec& spec, EmbeddingSettings s)
      : Layer(spec), s_(s), init_(spec, {{"embeddings_initializer", "embeddings"}}) {}

  Shape build(const Shape& in) override {
    ids_ = num_elements(in);
    checked_product({s_.input_dim, s_.output_dim}, "Embedding \"" + name() + "\"'s table");
    Shape out = in;
    out.push_back(s_.output_dim);
    return out;
  }
  // Keras's default, RandomUniform(-0.05, 0.05): the uniform initializer with limit sqrt(6 / 2400) = 0.05.
  std::vector<ParamSpec> params() const override {
    return init_.applied({{"embeddings", {s_.input_dim, s_.output_dim}, Init::GlorotUniform, 1200, 1200}});
  }
  // The mask, one value per id, when mask_zero.
  int64_t scratch_per_sample() const override { return s_.mask_zero ? ids_ : 0; }
  bool computes_mask() const override { return s_.mask_zero; }
  bool reads_integer_input() const override { return true; }
  // The table is float32 (Keras does not autocast it); the plan rounds the rows picked.
  bool autocasts_weights() const override { return false; }
  bool backward_reads_output() const override { return false; }

  void forward(const LayerContext& c) const override {
    c.be->embedding_forward(c.rows * ids_, s_.input_dim, s_.output_dim, c.x, c.w, c.y,
                            s_.mask_zero ? c.scratch : nullptr);
  }
  void backward(const LayerContext& c) const override {
    if (c.dw) c.be->embedding_backward(c.rows * ids_, s_.input_dim, s_.output_dim, c.x, c.dy, c.dw);
    // Ids have no gradient.
    if (c.dx) c.be->fill_zero(static_cast<size_t>(c.rows * ids_) * sizeof(float), c.dx);
  }

  // The one-hot rows of the ids times the table: relu(1 - |id - v|) is 1 at v == id and 0 elsewhere
  // for integers. (OpenCV 4.6 reads no Gather of indices computed from the input.) An id outside the
  // table gives a row of zeros.
  void export_onnx(OnnxLayerExport& e) const override {
    const int64_t V = s_.input_dim, D = s_.output_dim;
    std::vector<float> negated(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v) negated[static_cast<size_t>(v)] = -static_cast<float>(v);
    std::vector<int64_t> out_shape{-1};
    for (int64_t d : e.input_shape()) out_shape.push_back(d);
    out_shape.push_back(D);
    const std::string p = name() + "/";
    e.node("Reshape", {e.input_plain(), e.constant_ints("column", {2}, {-1, 1})}, {p + "ids"});
    e.node("MatMul", {p + "ids", e.constant("ones", {1, V}, std::vector<float>(static_cast<size_t>(V), 1.0f))},
           {p + "repeated"});
    e.node("Add", {p + "repeated", e.constant("minus_rows", {V}, std::move(negated))}, {p + "offset"});
    e.node("Abs", {p + "offset"}, {p + "distance"});
    e.node("Mul", {p + "distance", e.constant("minus_one", {1}, {-1.0f})}, {p + "negative"});
    e.node("Add", {p + "negative", e.constant("one", {1}, {1.0f})}, {p + "closeness"});
    e.node("Relu", {p + "closeness"}, {p + "one_hot"});
    e.node("MatMul", {p + "one_hot", e.constant("embeddings", {V, D}, e.weights()[0])}, {p + "rows"});
    e.node("Reshape", {p + "rows", e.constant_ints("shape", {static_cast<int64_t>(out_shape.size())}, out_shape)},
           {name()});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    config.set("input_dim", s_.input_dim);
    config.set("output_dim", s_.output_dim);
    config.set("mask_zero", s_.mask_zero);
    init_.add_to(config);
  }

 private:
  EmbeddingSettings s_;
  KerasInitializers init_;
  int64_t ids_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_embedding_layer(const LayerSpec& spec) {
  return std::make_unique<EmbeddingLayer>(spec, read_settings(spec));
}

}  // namespace kx::core
