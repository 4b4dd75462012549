// A model's weights through the C ABI: all of them in one flat array (kx_model_get_weights and
// _set_weights), from a file (kx_model_load_weights), and tensor by tensor (Keras's model.weights,
// get_weights(), layer.set_weights).
#include <algorithm>
#include <cstring>

#include "capi/src/handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

namespace {

const kx::WeightInfo& weight_at(const std::vector<kx::WeightInfo>& all, int64_t index, const char* function) {
  kx::require(index >= 0 && index < static_cast<int64_t>(all.size()), kx::Status::InvalidArgument,
              std::string(function) + ": index " + std::to_string(index) + " out of range [0, " +
                  std::to_string(all.size()) + ")");
  return all[static_cast<size_t>(index)];
}

}  // namespace

extern "C" {

kx_status kx_model_get_weights(const kx_model* m, float* out, size_t out_len) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_get_weights");
    require_arg(out, "out", "kx_model_get_weights");
    const size_t n = static_cast<size_t>(m->model.num_params());
    kx::require(out_len >= n, kx::Status::InvalidArgument,
                "kx_model_get_weights: out_len " + std::to_string(out_len) + " is less than the " + std::to_string(n) +
                    " parameters");
    const std::vector<float> w = m->model.get_weights();
    std::memcpy(out, w.data(), n * sizeof(float));
    return KX_OK;
  });
}

kx_status kx_model_set_weights(kx_model* m, const float* w, size_t w_len) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_set_weights");
    require_arg(w, "w", "kx_model_set_weights");
    m->model.set_weights(w, w_len);  // the count is checked before w is read
    return KX_OK;
  });
}

kx_status kx_model_load_weights(kx_model* m, const char* path, uint32_t flags, int64_t* loaded, int64_t* skipped) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_load_weights");
    require_arg(path, "path", "kx_model_load_weights");
    kx::require((flags & ~KX_LOAD_WEIGHTS_SKIP_MISMATCH) == 0, kx::Status::InvalidArgument,
                "kx_model_load_weights: unknown flags " + std::to_string(flags));
    const kx::WeightsReport r = m->model.load_weights(path, (flags & KX_LOAD_WEIGHTS_SKIP_MISMATCH) != 0);
    if (loaded) *loaded = r.loaded;
    if (skipped) *skipped = r.skipped;
    return KX_OK;
  });
}

int64_t kx_model_num_weights(const kx_model* m) {
  return kx::capi::guarded_value<int64_t>(-1, [&] {
    require_arg(m, "m", "kx_model_num_weights");
    return static_cast<int64_t>(m->model.weights().size());
  });
}

kx_status kx_model_weight_info(const kx_model* m, int64_t index, char** out_name, int64_t* shape, size_t* rank) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_weight_info");
    const std::vector<kx::WeightInfo> all = m->model.weights();
    const kx::WeightInfo& w = weight_at(all, index, "kx_model_weight_info");
    kx::require(w.shape.size() <= KX_MAX_RANK, kx::Status::Internal, "kx_model_weight_info: rank above KX_MAX_RANK");
    // Everything that can fail happens before the first out-parameter is written.
    char* name = out_name ? kx::capi::malloc_string(w.name) : nullptr;
    if (out_name) *out_name = name;
    if (shape) std::copy(w.shape.begin(), w.shape.end(), shape);
    if (rank) *rank = w.shape.size();
    return KX_OK;
  });
}

kx_status kx_model_weight_offset(const kx_model* m, int64_t index, int64_t* out_offset) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_weight_offset");
    require_arg(out_offset, "out_offset", "kx_model_weight_offset");
    const std::vector<kx::WeightInfo> all = m->model.weights();
    *out_offset = weight_at(all, index, "kx_model_weight_offset").offset;
    return KX_OK;
  });
}

kx_status kx_model_get_weight(const kx_model* m, const char* name, float* out, size_t out_len) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_get_weight");
    require_arg(name, "name", "kx_model_get_weight");
    require_arg(out, "out", "kx_model_get_weight");
    const std::vector<float> values = m->model.get_weight(name);
    kx::require(out_len >= values.size(), kx::Status::InvalidArgument,
                "kx_model_get_weight: \"" + std::string(name) + "\" has " + std::to_string(values.size()) +
                    " values, out_len is " + std::to_string(out_len));
    std::memcpy(out, values.data(), values.size() * sizeof(float));
    return KX_OK;
  });
}

kx_status kx_model_set_weight(kx_model* m, const char* name, const float* values, size_t n) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_set_weight");
    require_arg(name, "name", "kx_model_set_weight");
    require_arg(values, "values", "kx_model_set_weight");
    m->model.set_weight(name, values, n);
    return KX_OK;
  });
}

}  // extern "C"
