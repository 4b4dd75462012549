// Sizes a user gives (units, filters, kernels, strides, paddings, shapes from files) and every product
// of them, checked before anything is computed from them: a value or a product beyond kMaxElements is
// InvalidArgument naming `what`, never a signed overflow. A layer checks in build() every product it
// computes later (parameters, columns, scratch), so that params() and forward() need no checks.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kx/tensor.hpp"

namespace kx::core {

// v itself: InvalidArgument unless min <= v <= kMaxElements.
int64_t checked_dimension(int64_t v, int64_t min, const std::string& what);
// The product of the factors (each >= 0), or InvalidArgument when it exceeds kMaxElements.
int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what);
// The element count of a shape, checked the same way.
int64_t checked_elements(const Shape& s, const std::string& what);

}  // namespace kx::core
