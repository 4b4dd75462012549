// Errors of the C++ API: every failure is a kx::Error carrying the status code the C ABI returns.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kx {

enum class Status : int32_t {
  Ok = 0,
  Stopped = 1,
  InvalidArgument = -1,
  Misuse = -2,
  OutOfMemory = -3,
  Device = -4,
  Io = -5,
  Corrupt = -6,
  Unsupported = -7,
  Diverged = -8,
  Comm = -9,
  Internal = -100,
};

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

[[noreturn]] inline void fail(Status status, const std::string& message) { throw Error(status, message); }

inline void require(bool condition, Status status, const std::string& message) {
  if (!condition) fail(status, message);
}

}  // namespace kx
