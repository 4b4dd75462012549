// Software prefetch for loops that walk the rows of a tensor too large for the caches in order and
// spend long enough on each row that the hardware prefetcher falls behind: such a loop asks, as it
// starts a row, for the row about kPrefetchAhead values on. Past its block, its thread's share or the
// tensor's end too: a prefetch never faults.
#pragma once
#include <algorithm>
#include <cstdint>

namespace kx::backend::cpu {

inline constexpr int64_t kPrefetchAhead = 1024;

// The offset of the row to ask for, in values: whole rows, at least kPrefetchAhead values on.
inline int64_t prefetch_offset(int64_t cols) {
  const int64_t c = std::max<int64_t>(cols, 1);
  return (kPrefetchAhead + c - 1) / c * c;
}

// Asks for the cache lines of `cols` values from `row` (for reading; `write` for writing).
inline void prefetch_row(const float* row, int64_t cols, bool write = false) {
  for (int64_t c = 0; c < cols; c += 16) {
    if (write)
      __builtin_prefetch(row + c, 1);
    else
      __builtin_prefetch(row + c);
  }
}

}  // namespace kx::backend::cpu
