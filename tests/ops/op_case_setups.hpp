// Private to the op cases: each operation's setup (one per line of KX_BACKEND_KERNELS, defined in
// op_cases_*.cpp) and what their files share.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "ops/op_cases.hpp"

namespace kx::test::ops {

#define KX_DECLARE_OP_SETUP(name, params, args) OpCall setup_##name(OpIo& io);
KX_BACKEND_KERNELS(KX_DECLARE_OP_SETUP)
#undef KX_DECLARE_OP_SETUP

// n as a buffer length (the backend's sizes are int64_t).
inline size_t count(int64_t n) { return static_cast<size_t>(n); }

// The sub-cases of a case, run one after the other.
inline OpCall in_order(std::vector<OpCall> calls) {
  return [calls = std::move(calls)](backend::Backend& be) {
    for (const OpCall& call : calls) call(be);
  };
}

// A square stride and padding over [in_h, in_w, channels], with the output size that follows.
inline backend::Window2d make_window(int64_t in_h, int64_t in_w, int64_t channels, int64_t k_h, int64_t k_w,
                                     int64_t stride, int64_t pad) {
  backend::Window2d g;
  g.in_h = in_h, g.in_w = in_w, g.channels = channels, g.k_h = k_h, g.k_w = k_w;
  g.stride_h = g.stride_w = stride;
  g.pad_top = g.pad_left = pad;
  g.out_h = (in_h + 2 * pad - k_h) / stride + 1;
  g.out_w = (in_w + 2 * pad - k_w) / stride + 1;
  return g;
}

}  // namespace kx::test::ops
