// kx_strategy_*: the distribution strategies (default, mirrored, multi-worker, parameter server) and
// their settings.
#include <string>
#include <vector>

#include "capi/src/handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

extern "C" {

kx_status kx_strategy_create_default(kx_strategy** out) {
  return guarded([&] {
    require_arg(out, "out", "kx_strategy_create_default");
    return kx::capi::hand_out(std::make_unique<kx_strategy>(kx_strategy{kx::Strategy::default_strategy()}), out);
  });
}

kx_status kx_strategy_create_mirrored(const char* const* devices, size_t n_devices, kx_strategy** out) {
  return guarded([&] {
    require_arg(out, "out", "kx_strategy_create_mirrored");
    kx::require(devices || n_devices == 0, kx::Status::InvalidArgument,
                "kx_strategy_create_mirrored: devices is NULL but n_devices is " + std::to_string(n_devices));
    kx::require(devices == nullptr || n_devices > 0, kx::Status::InvalidArgument,
                "kx_strategy_create_mirrored: n_devices is 0 (pass NULL, 0 for every GPU)");
    std::vector<std::string> names;
    for (size_t i = 0; i < n_devices; ++i) {
      kx::require(devices[i] != nullptr, kx::Status::InvalidArgument,
                  "kx_strategy_create_mirrored: devices[" + std::to_string(i) + "] is NULL");
      names.emplace_back(devices[i]);
    }
    return kx::capi::hand_out(std::make_unique<kx_strategy>(kx_strategy{kx::Strategy::mirrored(names)}), out);
  });
}

int32_t kx_strategy_num_replicas(const kx_strategy* s) {
  return kx::capi::guarded_value<int32_t>(-1, [&] {
    require_arg(s, "s", "kx_strategy_num_replicas");
    return static_cast<int32_t>(s->strategy.num_replicas());
  });
}

kx_status kx_strategy_create_multi_worker(const char* const* local_devices, size_t n_local, kx_strategy** out) {
  return guarded([&] {
    require_arg(out, "out", "kx_strategy_create_multi_worker");
    kx::require(local_devices || n_local == 0, kx::Status::InvalidArgument,
                "kx_strategy_create_multi_worker: local_devices is NULL but n_local is " + std::to_string(n_local));
    std::vector<std::string> names;
    for (size_t i = 0; i < n_local; ++i) {
      kx::require(local_devices[i] != nullptr, kx::Status::InvalidArgument,
                  "kx_strategy_create_multi_worker: local_devices[" + std::to_string(i) + "] is NULL");
      names.emplace_back(local_devices[i]);
    }
    return kx::capi::hand_out(std::make_unique<kx_strategy>(kx_strategy{kx::Strategy::multi_worker(names)}), out);
  });
}

int32_t kx_strategy_num_workers(const kx_strategy* s) {
  return kx::capi::guarded_value<int32_t>(-1, [&] {
    require_arg(s, "s", "kx_strategy_num_workers");
    if (s->strategy.parameter_servers()) return static_cast<int32_t>(s->strategy.parameter_server_workers());
    return static_cast<int32_t>(s->strategy.num_workers());
  });
}

int32_t kx_strategy_worker_index(const kx_strategy* s) {
  return kx::capi::guarded_value<int32_t>(-1, [&] {
    require_arg(s, "s", "kx_strategy_worker_index");
    if (s->strategy.parameter_servers()) return static_cast<int32_t>(s->strategy.parameter_server_rank());
    return static_cast<int32_t>(s->strategy.worker_index());
  });
}

kx_status kx_strategy_create_parameter_server(const char* const* local_devices, size_t n_local, kx_strategy** out) {
  return guarded([&] {
    require_arg(out, "out", "kx_strategy_create_parameter_server");
    kx::require(local_devices || n_local == 0, kx::Status::InvalidArgument,
                "kx_strategy_create_parameter_server: local_devices is NULL but n_local is " + std::to_string(n_local));
    std::vector<std::string> names;
    for (size_t i = 0; i < n_local; ++i) {
      kx::require(local_devices[i] != nullptr, kx::Status::InvalidArgument,
                  "kx_strategy_create_parameter_server: local_devices[" + std::to_string(i) + "] is NULL");
      names.emplace_back(local_devices[i]);
    }
    return kx::capi::hand_out(std::make_unique<kx_strategy>(kx_strategy{kx::Strategy::parameter_server(names)}), out);
  });
}

kx_status kx_strategy_serve(kx_strategy* s) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_serve");
    s->strategy.serve();
    return KX_OK;
  });
}

kx_status kx_strategy_set_staleness(kx_strategy* s, int32_t max_steps_ahead) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_staleness");
    s->strategy.set_staleness(max_steps_ahead);
    return KX_OK;
  });
}

kx_status kx_strategy_set_timeout(kx_strategy* s, int32_t milliseconds) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_timeout");
    s->strategy.set_timeout(milliseconds);
    return KX_OK;
  });
}

kx_status kx_strategy_set_num_threads(kx_strategy* s, int32_t n) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_num_threads");
    s->strategy.set_num_threads(n);
    return KX_OK;
  });
}

kx_status kx_strategy_set_tf32(kx_strategy* s, int32_t enabled) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_tf32");
    s->strategy.set_tf32(enabled != 0);
    return KX_OK;
  });
}

static_assert(static_cast<int>(kx::StepGraphs::Off) == KX_STEP_GRAPHS_OFF &&
              static_cast<int>(kx::StepGraphs::Emulate) == KX_STEP_GRAPHS_EMULATE);
static_assert(static_cast<int>(kx::DataStreaming::Always) == KX_DATA_STREAMING_ALWAYS);

kx_status kx_strategy_set_step_graphs(kx_strategy* s, kx_step_graphs mode) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_step_graphs");
    const int32_t v = kx::capi::enum_value(mode);
    kx::require(v >= KX_STEP_GRAPHS_AUTO && v <= KX_STEP_GRAPHS_EMULATE, kx::Status::InvalidArgument,
                "kx_strategy_set_step_graphs: unknown mode " + std::to_string(v));
    s->strategy.set_step_graphs(static_cast<kx::StepGraphs>(v));
    return KX_OK;
  });
}

kx_status kx_strategy_set_data_streaming(kx_strategy* s, kx_data_streaming mode) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_data_streaming");
    const int32_t v = kx::capi::enum_value(mode);
    kx::require(v == KX_DATA_STREAMING_AUTO || v == KX_DATA_STREAMING_ALWAYS, kx::Status::InvalidArgument,
                "kx_strategy_set_data_streaming: unknown mode " + std::to_string(v));
    s->strategy.set_data_streaming(static_cast<kx::DataStreaming>(v));
    return KX_OK;
  });
}

kx_status kx_strategy_set_cudnn(kx_strategy* s, int32_t enabled) {
  return guarded([&] {
    require_arg(s, "s", "kx_strategy_set_cudnn");
    s->strategy.set_cudnn(enabled != 0);
    return KX_OK;
  });
}

void kx_strategy_destroy(kx_strategy* s) { std::unique_ptr<kx_strategy> owned(s); }

}  // extern "C"
