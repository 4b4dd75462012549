// What a CPU kernel that writes its output range by range runs after each range, on the thread that
// wrote it, while the range is in that core's cache: call(context, k) for range k. A plain function
// and its data: these kernels are called with ranges of tens of rows, and a std::function would add its
// type information and handlers to libkx for each caller.
#pragma once
#include <cstdint>

namespace kx::backend::cpu {

struct RangeDone {
  void (*call)(void* context, int64_t range) = nullptr;
  void* context = nullptr;
  void operator()(int64_t range) const {
    if (call) call(context, range);
  }
};

}  // namespace kx::backend::cpu
