// Model::export_onnx: the network as an ONNX inference graph (opset 13) with the current weights. Each
// layer writes its own nodes (Layer::export_onnx, core/layers/onnx_layer_export.hpp); this file walks
// the layers and gives each its inputs and weights.
#include <string>
#include <vector>

#include "core/layers/onnx_layer_export.hpp"
#include "core/model/model_impl.hpp"
#include "io/durable_write.hpp"
#include "io/onnx_graph.hpp"
#include "kx/version.hpp"

namespace kx {
namespace {

constexpr int64_t kOpset = 13;
constexpr int64_t kIrVersion = 7;  // the IR of opset 13 (ONNX 1.8)

// Layer i's parameters from the flat vector, in its params() order.
std::vector<std::vector<float>> layer_weights(const core::Network& net, const std::vector<float>& params, size_t i) {
  std::vector<std::vector<float>> out;
  auto first = params.begin() + net.param_offset[i];
  for (const core::ParamSpec& p : net.layers[i]->params()) {
    const int64_t n = num_elements(p.shape);
    out.emplace_back(first, first + n);
    first += n;
  }
  return out;
}

std::string onnx_model(const core::Network& net, const std::vector<float>& params) {
  io::OnnxGraph graph("kx_model");
  graph.add_input(net.input_name, net.shapes.front());
  core::OnnxValues values(graph, net.shapes, net.input_name);
  for (size_t i = 0; i < net.layers.size(); ++i) {
    const core::Layer& layer = *net.layers[i];
    core::OnnxLayerExport e(values, layer.name(), layer.class_name(), net.inputs[i], static_cast<int>(i) + 1,
                            layer_weights(net, params, i));
    layer.export_onnx(e);
    if (layer.computes_mask() || (layer.passes_mask() && values.masked(net.inputs[i].front())))
      values.set_masked(static_cast<int>(i) + 1);
  }
  const int last = static_cast<int>(net.layers.size());
  graph.add_node("Identity", {values.plain(last)}, {"output"});
  graph.add_output("output", net.shapes.back());
  return graph.model_bytes(kIrVersion, kOpset, "kx", KX_VERSION_STRING);
}

}  // namespace

void Model::export_onnx(const std::string& path) const {
  impl_->require_compiled("export_onnx");
  io::write_file_durably(path, onnx_model(impl_->net, impl_->host_params()));
}

}  // namespace kx
