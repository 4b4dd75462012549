// The C handle types and the exception firewall every extern "C" function goes through.
#pragma once
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "kx/kx.h"
#include "kx/kx.hpp"

struct kx_strategy {
  kx::Strategy strategy;
};
struct kx_model {
  kx::Model model;
};
struct kx_dataset {
  kx::Dataset dataset;
};
struct kx_callbacks {
  kx::Callbacks callbacks;
};
struct kx_history {
  kx::History history;
};

namespace kx::capi {

// Records the message of a failed call for kx_last_error_message on this thread.
kx_status set_error(kx_status status, const std::string& message) noexcept;

// Runs f, turning every exception into a status and a message: nothing crosses the C boundary.
template <class F>
kx_status guarded(F&& f) noexcept {
  try {
    return static_cast<kx_status>(f());
  } catch (const kx::Error& e) {
    return set_error(static_cast<kx_status>(e.status()), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(KX_E_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(KX_E_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return set_error(KX_E_INTERNAL, "internal error: unknown exception");
  }
}

// The firewall for functions that return a count or size rather than a status: the value of f, or
// `fallback` (-1) with the error recorded as guarded records it.
template <class R, class F>
R guarded_value(R fallback, F&& f) noexcept {
  R out = fallback;
  const kx_status st = guarded([&] {
    out = f();
    return KX_OK;
  });
  return st == KX_OK ? out : fallback;
}

// The integer a C caller passed as an enum. C allows any int there, while reading an out-of-range
// value through a C++ enum type is undefined, so enums are only ever read as bytes, then checked.
template <class E>
int32_t enum_value(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int32_t), "kx enums are 32-bit");
  int32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

inline void require_arg(const void* p, const char* name, const char* function) {
  if (!p) kx::fail(kx::Status::InvalidArgument, std::string(function) + ": " + name + " is NULL");
}

// Hands a new object to the caller through *out (only on success).
// A copy of text in memory the caller frees with kx_free.
inline char* malloc_string(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) throw std::bad_alloc();
  std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

template <class T>
kx_status hand_out(std::unique_ptr<T> obj, T** out) {
  *out = obj.release();
  return KX_OK;
}

// Copies a caller's options struct that starts with struct_size into a zeroed T. A larger struct (a
// newer kx.h) is accepted only if the fields this library does not know are zero.
template <class T>
T read_options(const T* user, const char* function) {
  T out;
  std::memset(&out, 0, sizeof out);
  if (!user) return out;
  const uint32_t size = user->struct_size;
  if (size < sizeof(uint32_t))
    kx::fail(kx::Status::InvalidArgument,
             std::string(function) + ": options.struct_size is not set (initialise the options with its _init function)");
  std::memcpy(&out, user, std::min<size_t>(size, sizeof out));
  const unsigned char* extra = reinterpret_cast<const unsigned char*>(user);
  for (size_t i = sizeof out; i < size; ++i)
    if (extra[i] != 0)
      kx::fail(kx::Status::Unsupported,
               std::string(function) + ": options set fields that this version of kx does not know");
  out.struct_size = static_cast<uint32_t>(sizeof out);
  return out;
}

template <class T>
void init_options(T* o, size_t struct_size) noexcept {
  if (!o || struct_size < sizeof(uint32_t)) return;
  const size_t n = std::min(struct_size, sizeof(T));
  std::memset(o, 0, n);
  o->struct_size = static_cast<uint32_t>(n);
}

}  // namespace kx::capi
