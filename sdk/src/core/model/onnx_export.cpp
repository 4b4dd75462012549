// Model::export_onnx: the network as an ONNX inference graph (opset 13) with the current weights.
//
// kx holds images channels-last ([N, H, W, C], as Keras); ONNX's Conv, pooling and BatchNormalization
// want NCHW. Each value is kept in the layout it was made in, and a Transpose converts it only where
// a reader needs the other one: Conv, pooling, padding and batch normalisation of images read NCHW;
// Flatten, Dense and the model's output read kx's own order (so Flatten keeps the channels-last
// element order that Dense's kernel was trained on). Element-wise layers keep their input's layout.
#include <cmath>
#include <string>
#include <vector>

#include "core/model/model_impl.hpp"
#include "io/onnx_graph.hpp"
#include "io/safetensors.hpp"
#include "kx/error.hpp"
#include "kx/version.hpp"

namespace kx {
namespace {

using io::OnnxAttribute;

constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;  // the IR of opset 13 (ONNX 1.8)

// Normalization's epsilon under the square root (normalization_layer.cpp).
constexpr double kNormalizationEpsilon = 1e-14;

class OnnxExporter {
 public:
  OnnxExporter(const core::Network& net, std::vector<float> params)
      : net_(net), params_(std::move(params)), graph_("kx_model") {
    const size_t tensors = net.shapes.size();
    plain_.resize(tensors);
    nchw_.resize(tensors);
  }

  std::string run() {
    graph_.add_input(net_.input_name, net_.shapes.front());
    plain_[0] = net_.input_name;
    for (size_t i = 0; i < net_.layers.size(); ++i) export_layer(static_cast<int>(i));
    const int last = static_cast<int>(net_.layers.size());
    graph_.add_node("Identity", {plain(last)}, {"output"});
    graph_.add_output("output", net_.shapes.back());
    return graph_.model_bytes(kIrVersion, kOpset, "kx", KX_VERSION_STRING);
  }

 private:
  bool is_image(int t) const { return net_.shapes[static_cast<size_t>(t)].size() == 3; }
  int64_t rank(int t) const { return static_cast<int64_t>(net_.shapes[static_cast<size_t>(t)].size()) + 1; }

  // Value t in kx's order (images [N, H, W, C]).
  std::string plain(int t) {
    std::string& name = plain_[static_cast<size_t>(t)];
    if (name.empty()) {
      name = nchw_[static_cast<size_t>(t)] + "/nhwc";
      graph_.add_node("Transpose", {nchw_[static_cast<size_t>(t)]}, {name}, {OnnxAttribute::ints("perm", {0, 2, 3, 1})});
    }
    return name;
  }
  // Image t as [N, C, H, W].
  std::string nchw(int t) {
    std::string& name = nchw_[static_cast<size_t>(t)];
    if (name.empty()) {
      name = plain_[static_cast<size_t>(t)] + "/nchw";
      graph_.add_node("Transpose", {plain_[static_cast<size_t>(t)]}, {name}, {OnnxAttribute::ints("perm", {0, 3, 1, 2})});
    }
    return name;
  }
  // An element-wise reader takes t in the layout it already has: NCHW when t is an image made so.
  bool prefers_nchw(int t) const { return is_image(t) && !nchw_[static_cast<size_t>(t)].empty(); }

  // The layer's parameters, in its params() order.
  std::vector<std::vector<float>> weights(int layer) const {
    std::vector<std::vector<float>> out;
    auto first = params_.begin() + net_.param_offset[static_cast<size_t>(layer)];
    for (const core::ParamSpec& p : net_.layers[static_cast<size_t>(layer)]->params()) {
      const int64_t n = num_elements(p.shape);
      out.emplace_back(first, first + n);
      first += n;
    }
    return out;
  }
  std::string constant(const std::string& name, const std::vector<int64_t>& dims, std::vector<float> values) {
    graph_.add_initializer(name, dims, values);
    return name;
  }

  // act applied to value x; the softmax over `axis`. Returns the name of the result.
  std::string activation(Activation act, const std::string& x, const std::string& out, int64_t axis) {
    switch (act) {
      case Activation::None:
        return x;
      case Activation::Relu:
        graph_.add_node("Relu", {x}, {out});
        return out;
      case Activation::Sigmoid:
        graph_.add_node("Sigmoid", {x}, {out});
        return out;
      case Activation::Tanh:
        graph_.add_node("Tanh", {x}, {out});
        return out;
      case Activation::Softmax:
        graph_.add_node("Softmax", {x}, {out}, {OnnxAttribute::integer("axis", axis)});
        return out;
    }
    fail(Status::Unsupported, "ONNX export: an unknown activation");
  }

  // The output of layer i is value i + 1, in one layout or the other.
  void set_output(int layer, const std::string& name, bool nchw_layout) {
    (nchw_layout ? nchw_ : plain_)[static_cast<size_t>(layer) + 1] = name;
  }

  void export_layer(int i) {
    const core::Layer& layer = *net_.layers[static_cast<size_t>(i)];
    const LayerSpec& spec = layer.spec();
    const std::vector<int>& in = net_.inputs[static_cast<size_t>(i)];
    const int x = in.front();
    const std::string& name = layer.name();
    switch (spec.kind) {
      case LayerKind::Dense: return dense(i, x);
      case LayerKind::Conv2D: return conv2d(i, x);
      case LayerKind::MaxPooling2D:
      case LayerKind::AveragePooling2D: {
        const int64_t sh = spec.pool_stride_h > 0 ? spec.pool_stride_h : spec.pool_h;
        const int64_t sw = spec.pool_stride_w > 0 ? spec.pool_stride_w : spec.pool_w;
        graph_.add_node(spec.kind == LayerKind::MaxPooling2D ? "MaxPool" : "AveragePool", {nchw(x)}, {name},
                        {OnnxAttribute::ints("kernel_shape", {spec.pool_h, spec.pool_w}),
                         OnnxAttribute::ints("strides", {sh, sw})});
        return set_output(i, name, true);
      }
      case LayerKind::GlobalAveragePooling2D:
        graph_.add_node("GlobalAveragePool", {nchw(x)}, {name + "/pooled"});
        graph_.add_node("Flatten", {name + "/pooled"}, {name}, {OnnxAttribute::integer("axis", 1)});
        return set_output(i, name, false);
      case LayerKind::ZeroPadding2D:
        graph_.add_initializer(name + "/pads", {8},
                               std::vector<int64_t>{0, 0, spec.pad_top, spec.pad_left, 0, 0, spec.pad_bottom,
                                                    spec.pad_right});
        graph_.add_node("Pad", {nchw(x), name + "/pads"}, {name});
        return set_output(i, name, true);
      case LayerKind::Normalization: {
        const auto w = weights(i);  // mean, variance
        const std::vector<float> ones(w[0].size(), 1.0f), zeros(w[0].size(), 0.0f);
        return normalize(i, x, ones, zeros, w[0], w[1], kNormalizationEpsilon);
      }
      case LayerKind::BatchNormalization: {
        const auto w = weights(i);  // gamma, beta, moving_mean, moving_variance
        return normalize(i, x, w[0], w[1], w[2], w[3], spec.epsilon);
      }
      case LayerKind::Add: {
        const bool nchw_layout = prefers_nchw(x);
        std::string sum = nchw_layout ? nchw(x) : plain(x);
        for (size_t k = 1; k < in.size(); ++k) {
          const std::string out = k + 1 == in.size() ? name : name + "/sum" + std::to_string(k);
          graph_.add_node("Add", {sum, nchw_layout ? nchw(in[k]) : plain(in[k])}, {out});
          sum = out;
        }
        return set_output(i, name, nchw_layout);
      }
      case LayerKind::Concatenate: {
        // The last axis of kx's order: the channels, axis 1 of NCHW images.
        const bool nchw_layout = is_image(x);
        std::vector<std::string> parts;
        for (int t : in) parts.push_back(nchw_layout ? nchw(t) : plain(t));
        graph_.add_node("Concat", parts, {name}, {OnnxAttribute::integer("axis", nchw_layout ? 1 : rank(x) - 1)});
        return set_output(i, name, nchw_layout);
      }
      case LayerKind::Activation: {
        // "linear" returns its input's value: the layer's output is that value (as Dropout's).
        const bool nchw_layout = prefers_nchw(x);
        const std::string input = nchw_layout ? nchw(x) : plain(x);
        return set_output(i, activation(spec.activation, input, name, nchw_layout ? 1 : rank(x) - 1), nchw_layout);
      }
      case LayerKind::Dropout:  // identity at inference: the layer's output is its input's value
        plain_[static_cast<size_t>(i) + 1] = plain_[static_cast<size_t>(x)];
        nchw_[static_cast<size_t>(i) + 1] = nchw_[static_cast<size_t>(x)];
        return;
      case LayerKind::Flatten:
        if (rank(x) == 2) {
          plain_[static_cast<size_t>(i) + 1] = plain(x);
          return;
        }
        graph_.add_node("Flatten", {plain(x)}, {name}, {OnnxAttribute::integer("axis", 1)});
        return set_output(i, name, false);
    }
    fail(Status::Unsupported, std::string("ONNX export: layer \"") + name + "\" (" + layer.class_name() +
                                  ") has no ONNX form");
  }

  // Dense: Gemm with Keras's kernel [in, units] stored transposed (transB = 1, the form runtimes
  // know best), then the activation.
  void dense(int i, int x) {
    const core::Layer& layer = *net_.layers[static_cast<size_t>(i)];
    const LayerSpec& spec = layer.spec();
    const std::string& name = layer.name();
    const auto w = weights(i);
    const int64_t in = num_elements(net_.shapes[static_cast<size_t>(x)]), units = spec.units;
    std::vector<float> kernel_t(w[0].size());
    for (int64_t r = 0; r < in; ++r)
      for (int64_t u = 0; u < units; ++u)
        kernel_t[static_cast<size_t>(u * in + r)] = w[0][static_cast<size_t>(r * units + u)];
    std::vector<std::string> inputs{plain(x), constant(name + "/kernel", {units, in}, std::move(kernel_t))};
    if (spec.use_bias) inputs.push_back(constant(name + "/bias", {units}, w[1]));
    const std::string linear = spec.activation == Activation::None ? name : name + "/linear";
    graph_.add_node("Gemm", inputs, {linear}, {OnnxAttribute::integer("transB", 1)});
    activation(spec.activation, linear, name, 1);
    set_output(i, name, false);
  }

  // Conv2D: Keras's kernel [kh, kw, in, filters] becomes ONNX's [filters, in, kh, kw]; "same" padding
  // puts the odd pixel at the bottom and right, as Keras (TensorFlow) does.
  void conv2d(int i, int x) {
    const core::Layer& layer = *net_.layers[static_cast<size_t>(i)];
    const LayerSpec& spec = layer.spec();
    const std::string& name = layer.name();
    const Shape& s = net_.shapes[static_cast<size_t>(x)];
    const int64_t H = s[0], W = s[1], C = s[2], F = spec.filters, kh = spec.kernel_h, kw = spec.kernel_w;
    const auto w = weights(i);
    std::vector<float> kernel(w[0].size());
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < kw; ++b)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t f = 0; f < F; ++f)
            kernel[static_cast<size_t>(((f * C + c) * kh + a) * kw + b)] =
                w[0][static_cast<size_t>(((a * kw + b) * C + c) * F + f)];
    int64_t top = 0, left = 0, bottom = 0, right = 0;
    if (spec.padding == Padding::Same) {
      const int64_t out_h = (H + spec.stride - 1) / spec.stride, out_w = (W + spec.stride - 1) / spec.stride;
      const int64_t pad_h = std::max<int64_t>((out_h - 1) * spec.stride + kh - H, 0);
      const int64_t pad_w = std::max<int64_t>((out_w - 1) * spec.stride + kw - W, 0);
      top = pad_h / 2, bottom = pad_h - top, left = pad_w / 2, right = pad_w - left;
    }
    std::vector<std::string> inputs{nchw(x), constant(name + "/kernel", {F, C, kh, kw}, std::move(kernel))};
    if (spec.use_bias) inputs.push_back(constant(name + "/bias", {F}, w[1]));
    const std::string linear = spec.activation == Activation::None ? name : name + "/linear";
    graph_.add_node("Conv", inputs, {linear},
                    {OnnxAttribute::ints("kernel_shape", {kh, kw}), OnnxAttribute::ints("strides", {spec.stride, spec.stride}),
                     OnnxAttribute::ints("pads", {top, left, bottom, right})});
    activation(spec.activation, linear, name, 1);
    set_output(i, name, true);
  }

  // y = gamma * (x - mean) / sqrt(variance + epsilon) + beta over the last axis of kx's order: ONNX's
  // BatchNormalization (inference form) where that axis is ONNX's axis 1 (images as NCHW, vectors),
  // else the same as x * scale + shift, broadcast along the last axis.
  void normalize(int i, int x, const std::vector<float>& gamma, const std::vector<float>& beta,
                 const std::vector<float>& mean, const std::vector<float>& variance, double epsilon) {
    const std::string& name = net_.layers[static_cast<size_t>(i)]->name();
    const auto C = static_cast<int64_t>(gamma.size());
    if (is_image(x) || rank(x) == 2) {
      const bool image = is_image(x);
      graph_.add_node("BatchNormalization",
                      {image ? nchw(x) : plain(x), constant(name + "/gamma", {C}, gamma),
                       constant(name + "/beta", {C}, beta), constant(name + "/mean", {C}, mean),
                       constant(name + "/variance", {C}, variance)},
                      {name}, {OnnxAttribute::real("epsilon", static_cast<float>(epsilon))});
      return set_output(i, name, image);
    }
    std::vector<float> scale(gamma.size()), shift(gamma.size());
    for (size_t c = 0; c < gamma.size(); ++c) {
      const double s = gamma[c] / std::sqrt(static_cast<double>(variance[c]) + epsilon);
      scale[c] = static_cast<float>(s);
      shift[c] = static_cast<float>(beta[c] - mean[c] * s);
    }
    graph_.add_node("Mul", {plain(x), constant(name + "/scale", {C}, scale)}, {name + "/scaled"});
    graph_.add_node("Add", {name + "/scaled", constant(name + "/shift", {C}, shift)}, {name});
    set_output(i, name, false);
  }

  const core::Network& net_;
  std::vector<float> params_;
  io::OnnxGraph graph_;
  std::vector<std::string> plain_, nchw_;  // per value: its name in each layout ("" = not made)
};

}  // namespace

void Model::export_onnx(const std::string& path) const {
  impl_->require_compiled("export_onnx");
  OnnxExporter exporter(impl_->net, impl_->host_params());
  io::write_file_durably(path, exporter.run());
}

}  // namespace kx
