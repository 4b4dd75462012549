#include "core/checked_size.hpp"

#include "kx/error.hpp"

namespace kx::core {
namespace {

[[noreturn]] void too_large(const std::string& what) {
  fail(Status::InvalidArgument, what + " is larger than kx supports (" + std::to_string(kMaxElements) + " values)");
}

}  // namespace

int64_t checked_dimension(int64_t v, int64_t min, const std::string& what) {
  require(v >= min, Status::InvalidArgument, what + " must be at least " + std::to_string(min) + ", got " + std::to_string(v));
  if (v > kMaxElements) too_large(what + " " + std::to_string(v));
  return v;
}

int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t n = 1;
  for (int64_t f : factors) {
    require(f >= 0, Status::InvalidArgument, what + " has a negative size " + std::to_string(f));
    if (__builtin_mul_overflow(n, f, &n) || n > kMaxElements) too_large(what);
  }
  return n;
}

int64_t checked_elements(const Shape& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) {
    require(d >= 0, Status::InvalidArgument, what + " " + to_string(s) + " has a negative dimension");
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) too_large(what + " " + to_string(s));
  }
  return n;
}

}  // namespace kx::core
