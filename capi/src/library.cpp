// Library information (version, status names), the calling thread's last error message, kx_free and
// devices.
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

}  // extern "C"
