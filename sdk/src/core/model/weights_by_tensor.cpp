// The model's weights tensor by tensor, as Keras's model.weights / get_weights() list them.
#include <algorithm>

#include "core/model/model_impl.hpp"
#include "kx/error.hpp"

namespace kx {

std::vector<WeightInfo> Model::Impl::tensors_of(const std::vector<int>& layers) const {
  std::vector<WeightInfo> out;
  for (const int layer : layers) {
    const auto i = static_cast<size_t>(layer);
    int64_t offset = net.param_offset[i];
    for (const core::ParamSpec& p : net.layers[i]->params()) {
      out.push_back({net.layers[i]->name() + "/" + p.name, p.shape, offset, p.trainable, p.keras_path});
      offset += num_elements(p.shape);
    }
  }
  return out;
}

// Keras's order, which for a functional model is not always the order the layers were added in (nor
// the arena's): offsets say where each tensor is.
std::vector<WeightInfo> Model::weights() const { return impl_->tensors_of(impl_->net.keras_layer_order()); }

namespace {

const WeightInfo& find_weight(const std::vector<WeightInfo>& all, const std::string& name, const char* what) {
  const auto it = std::find_if(all.begin(), all.end(), [&](const WeightInfo& w) { return w.name == name; });
  if (it == all.end()) {
    std::string known;
    for (size_t i = 0; i < all.size() && i < 6; ++i) known += (i ? ", " : "") + all[i].name;
    if (all.size() > 6) known += ", ...";
    fail(Status::InvalidArgument, std::string(what) + ": the model has no weight \"" + name + "\" (it has " +
                                      (known.empty() ? std::string("none") : known) + ")");
  }
  return *it;
}

}  // namespace

std::vector<float> Model::get_weight(const std::string& name) const {
  impl_->require_compiled("get_weight");
  const std::vector<WeightInfo> all = weights();
  const WeightInfo& w = find_weight(all, name, "get_weight");
  // Replica 0 holds what every replica holds between steps.
  std::vector<float> out(static_cast<size_t>(num_elements(w.shape)));
  const Replica& r = impl_->replicas.front();
  r.be->to_host(r.params.data() + w.offset, out.size() * sizeof(float), out.data());
  return out;
}

void Model::set_weight(const std::string& name, const float* values, size_t count) {
  impl_->require_compiled("set_weight");
  const std::vector<WeightInfo> all = weights();
  const WeightInfo& w = find_weight(all, name, "set_weight");
  const auto n = static_cast<size_t>(num_elements(w.shape));
  require(count == n, Status::InvalidArgument,
          "set_weight: \"" + name + "\" has shape " + to_string(w.shape) + " (" + std::to_string(n) +
              " values), got " + std::to_string(count));
  require(values != nullptr || n == 0, Status::InvalidArgument, "set_weight: values is NULL");
  for (Replica& r : impl_->replicas) r.be->to_device(values, n * sizeof(float), r.params.data() + w.offset);
}

}  // namespace kx
