// Library information, the thread-local error message, kx_free and devices.
#include <cstdlib>
#include <cstring>

#include "capi/src/handles.hpp"
#include "kx/version.hpp"

namespace kx::capi {
namespace {
// The C ABI's one piece of mutable global state: the last error message, per thread.
thread_local std::string t_last_error;
}  // namespace

kx_status set_error(kx_status status, const std::string& message) noexcept {
  try {
    // One line: callers print it as is.
    std::string line = message;
    for (char& c : line)
      if (c == '\n' || c == '\r') c = ' ';
    t_last_error = std::move(line);
  } catch (...) {
    t_last_error.clear();
  }
  return status;
}

}  // namespace kx::capi

using kx::capi::guarded;
using kx::capi::require_arg;

extern "C" {

const char* kx_last_error_message(void) { return kx::capi::t_last_error.c_str(); }

const char* kx_status_name(kx_status st) {
  switch (st) {
    case KX_OK: return "KX_OK";
    case KX_STOPPED: return "KX_STOPPED";
    case KX_E_INVALID_ARGUMENT: return "KX_E_INVALID_ARGUMENT";
    case KX_E_MISUSE: return "KX_E_MISUSE";
    case KX_E_OUT_OF_MEMORY: return "KX_E_OUT_OF_MEMORY";
    case KX_E_DEVICE: return "KX_E_DEVICE";
    case KX_E_IO: return "KX_E_IO";
    case KX_E_CORRUPT: return "KX_E_CORRUPT";
    case KX_E_UNSUPPORTED: return "KX_E_UNSUPPORTED";
    case KX_E_DIVERGED: return "KX_E_DIVERGED";
    case KX_E_COMM: return "KX_E_COMM";
    case KX_E_INTERNAL: return "KX_E_INTERNAL";
    default: return "KX_UNKNOWN_STATUS";
  }
}

uint32_t kx_version_number(void) { return KX_VERSION_MAJOR * 10000 + KX_VERSION_MINOR * 100 + KX_VERSION_PATCH; }

const char* kx_version_string(void) { return KX_VERSION_STRING; }

void kx_free(void* p) { std::free(p); }

int32_t kx_device_count(kx_device_kind kind) {
  return kx::capi::guarded_value<int32_t>(-1, [&] {
    const int32_t k = kx::capi::enum_value(kind);
    kx::require(k == KX_DEVICE_CPU || k == KX_DEVICE_CUDA, kx::Status::InvalidArgument,
                "kx_device_count: unknown device kind " + std::to_string(k));
    return static_cast<int32_t>(kx::device_count(static_cast<kx::DeviceKind>(k)));
  });
}

kx_status kx_device_name(kx_device_kind kind, int32_t index, char* buf, size_t buf_len) {
  return guarded([&] {
    require_arg(buf, "buf", "kx_device_name");
    const int32_t k = kx::capi::enum_value(kind);
    kx::require(k == KX_DEVICE_CPU || k == KX_DEVICE_CUDA, kx::Status::InvalidArgument,
                "kx_device_name: unknown device kind " + std::to_string(k));
    const auto dev_kind = static_cast<kx::DeviceKind>(k);
    const int count = kx::device_count(dev_kind);
    kx::require(index >= 0 && index < count, kx::Status::InvalidArgument,
                "kx_device_name: index " + std::to_string(index) + " out of range [0, " + std::to_string(count) + ")");
    const std::string name = kx::Device{dev_kind, index}.name();
    kx::require(buf_len > name.size(), kx::Status::InvalidArgument,
                "kx_device_name: buffer of " + std::to_string(buf_len) + " bytes is too small for \"" + name + "\"");
    std::memcpy(buf, name.c_str(), name.size() + 1);
    return KX_OK;
  });
}

kx_status kx_device_status(kx_device_kind kind, char** out_text) {
  return guarded([&] {
    require_arg(out_text, "out_text", "kx_device_status");
    const int32_t k = kx::capi::enum_value(kind);
    kx::require(k == KX_DEVICE_CPU || k == KX_DEVICE_CUDA, kx::Status::InvalidArgument,
                "kx_device_status: unknown device kind " + std::to_string(k));
    *out_text = kx::capi::malloc_string(kx::device_status(static_cast<kx::DeviceKind>(k)));
    return KX_OK;
  });
}

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
