// What a CPU kernel that writes its output range by range runs after each range, on the thread that
// wrote it, while the range is in that core's cache: call(context, k) for range k. A plain function
// and its data: these kernels are called with ranges of tens of rows, and a std::function would add its
// type information and handlers to libkx for each caller.
#pragma once
#include <omp.h>

#include <cstdint>

namespace kx::backend::cpu {

struct RangeDone {
  void (*call)(void* context, int64_t range) = nullptr;
  void* context = nullptr;
  void operator()(int64_t range) const {
    if (call) call(context, range);
  }
};

// write(k) then done(k) for ranges [0, ranges) on up to `threads` threads, each a contiguous run of
// them. No done(k) runs before every thread has written its first range, so range 0 is final by then
// (column sums shift by its first row).
template <class Write>
void write_by_ranges(int64_t ranges, int threads, Write write, RangeDone done) {
  const int nt = static_cast<int>(ranges < threads ? ranges : threads);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const int64_t id = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t first = ranges * id / n, last = ranges * (id + 1) / n;
    for (int64_t k = first; k < last; ++k) {
      write(k);
      if (k == first) {
#pragma omp barrier
      }
      done(k);
    }
  }
}

}  // namespace kx::backend::cpu
