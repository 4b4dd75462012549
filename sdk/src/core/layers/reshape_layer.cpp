// Reshape, as keras.layers.Reshape: each sample takes target_shape (one entry may be -1, inferred from
// the others). Row-major data keeps its order, so the output is the input buffer. Its settings live in
// LayerSpec::config (the layer's Keras config), read by the factory.
#include "core/layers/layer.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

Shape read_target(const LayerSpec& spec) {
  const std::string what = "Reshape \"" + spec.name + "\"";
  require(!spec.config.empty(), Status::InvalidArgument, what + " needs its Keras config (target_shape)");
  const json::Value config = json::parse(spec.config);
  Shape target;
  int unknown = 0;
  for (const json::Value& d : config.at("target_shape", what).as_array(what + " target_shape")) {
    const int64_t v = d.is_null() ? -1 : d.as_int(what + " target_shape");
    require(v == -1 || v >= 1, Status::InvalidArgument, what + " target_shape: each size must be >= 1 or -1");
    unknown += v == -1;
    target.push_back(v);
  }
  require(!target.empty(), Status::InvalidArgument, what + " target_shape is empty");
  require(unknown <= 1, Status::InvalidArgument, what + " target_shape may leave one size unknown (-1), not " +
                                                     std::to_string(unknown));
  return target;
}

class ReshapeLayer final : public Layer {
 public:
  ReshapeLayer(const LayerSpec& spec, Shape target) : Layer(spec), target_(std::move(target)) {}

  Shape build(const Shape& in) override {
    const std::string what = "Reshape layer \"" + name() + "\"";
    const int64_t size = checked_elements(in, what + "'s input");
    int64_t known = 1;
    for (const int64_t d : target_)
      if (d != -1) known = checked_product({known, d}, what + "'s target_shape");
    Shape out = target_;
    for (int64_t& d : out)
      if (d == -1) {
        require(size % known == 0, Status::InvalidArgument,
                what + ": cannot reshape " + to_string(in) + " into " + to_string(target_));
        d = size / known;
      }
    require(num_elements(out) == size, Status::InvalidArgument,
            what + ": cannot reshape " + to_string(in) + " (" + std::to_string(size) + " values) into " +
                to_string(target_));
    shape_ = out;
    return out;
  }
  bool aliases_input() const override { return true; }
  void forward(const LayerContext&) const override {}
  void backward(const LayerContext&) const override {}

  // ONNX's Reshape with 0 keeping the batch size, in kx's (channels-last) order.
  void export_onnx(OnnxLayerExport& e) const override {
    std::vector<int64_t> dims{0};
    dims.insert(dims.end(), shape_.begin(), shape_.end());
    const int64_t rank = static_cast<int64_t>(dims.size());
    e.node("Reshape", {e.input_plain(), e.constant_ints("shape", {rank}, std::move(dims))}, {name()});
    e.output(name(), false);
  }

 protected:
  void add_config(json::Value& config) const override {
    json::Value::Array a;
    for (const int64_t d : target_) a.emplace_back(d);
    config.set("target_shape", std::move(a));
  }

 private:
  Shape target_, shape_;
};

}  // namespace

std::unique_ptr<Layer> make_reshape_layer(const LayerSpec& spec) {
  return std::make_unique<ReshapeLayer>(spec, read_target(spec));
}

}  // namespace kx::core
