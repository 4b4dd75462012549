// Out-of-memory is never swallowed: a recording whose body fails for lack of memory rethrows that
// error instead of reporting "could not record" (after which the step would run, and fail, again).
#pragma once
#include <exception>
#include <new>

#include "kx/error.hpp"

namespace kx::backend {

inline bool is_out_of_memory(const std::exception_ptr& failure) {
  if (!failure) return false;
  try {
    std::rethrow_exception(failure);
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const Error& e) {
    return e.status() == Status::OutOfMemory;
  } catch (...) {
    return false;
  }
}

}  // namespace kx::backend
