// Where the buffers of one replica's training step lie: every activation, every gradient between
// layers and every layer's workspace is a block of one arena, live from its first use to its last over
// the step (the forward pass, the loss, the backward pass in reverse), and blocks whose lifetimes do
// not overlap share memory. Made without allocating, so a model can report it before training.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "core/model/network.hpp"

namespace kx::core {

struct ArenaLayout {
  static constexpr int64_t kNone = -1;  // no buffer
  // Offsets in floats into the arena, kNone where there is no buffer.
  std::vector<int64_t> act;                     // act[t]: tensor t
  std::vector<int64_t> grad;                    // grad[t]: dL/d tensor t
  std::vector<std::vector<int64_t>> edge_grad;  // edge_grad[i][k]: where layer i writes dL/d input k
  // grad[tensor] += extra after layer i's backward: the share of a reader other than the first.
  struct PendingSum {
    int tensor;
    int64_t extra;
  };
  std::vector<std::vector<PendingSum>> sums_after;  // per layer
  std::vector<int64_t> forward_workspace, backward_workspace;  // per layer
  // Per layer, the floats of its scratch: kept from forward to backward, and zero where the layer
  // never writes (its own allocation, outside the arena).
  std::vector<int64_t> scratch;

  // Per layer, the blocks whose last use is its forward, or its backward (with the sums after it).
  struct Span {
    int64_t offset, floats;
  };
  std::vector<std::vector<Span>> dead_after_forward, dead_after_backward;

  int64_t arena_floats = 0;  // the arena's size
  // What the arena's blocks add up to (each buffer apart), by kind.
  int64_t activation_floats = 0, gradient_floats = 0, workspace_floats = 0;
  int64_t scratch_floats = 0;  // every layer's scratch
};

// The layout of a step of up to `rows` samples on `be`. reuse false: every block apart (the arena is
// the sum of its blocks), as a test's reference.
ArenaLayout plan_step_arena(const backend::Backend& be, const Network& net, int64_t rows, bool reuse);

}  // namespace kx::core
