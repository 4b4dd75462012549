#include "core/train/step_arena.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <string>
#include <utility>

#include "config/test_hooks.hpp"
#include "core/checked_size.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

// Every block starts on a 256-byte boundary and spans whole cache lines, as a buffer of its own would:
// the SIMD kernels may touch a line's tail, and device kernels read aligned vectors.
constexpr int64_t kBlockAlignFloats = 64;

struct Block {
  int64_t floats = 0;
  int first = INT_MAX, last = -1;  // the moments of its first and last use
};

class Blocks {
 public:
  int make(int64_t floats) {
    checked_dimension(floats, 0, "a training buffer");
    const int64_t rounded = checked_product({(floats + kBlockAlignFloats - 1) / kBlockAlignFloats, kBlockAlignFloats},
                                            "a training buffer");
    // Every sum of blocks, in bytes, and the figures reported with it stay far from overflowing.
    require(rounded <= kMostFloats - total_, Status::InvalidArgument,
            "the training step's buffers exceed " + std::to_string(kMostFloats) + " floats");
    total_ += rounded;
    blocks_.push_back({rounded});
    return static_cast<int>(blocks_.size()) - 1;
  }
  void use(int b, int moment) {
    if (b < 0) return;
    Block& k = blocks_[static_cast<size_t>(b)];
    k.first = std::min(k.first, moment);
    k.last = std::max(k.last, moment);
  }
  int64_t floats(int b) const { return blocks_[static_cast<size_t>(b)].floats; }
  int last(int b) const { return blocks_[static_cast<size_t>(b)].last; }
  int size() const { return static_cast<int>(blocks_.size()); }

  // Offsets for every block: apart, or packed so that blocks live at the same moment never overlap
  // (the largest first, each at the lowest offset that fits, the classic greedy by size).
  std::pair<std::vector<int64_t>, int64_t> place(bool reuse) const {
    const size_t n = blocks_.size();
    std::vector<int64_t> offset(n, 0);
    int64_t end = 0;
    if (!reuse) {
      for (size_t b = 0; b < n; ++b) {
        offset[b] = end;
        end += blocks_[b].floats;
      }
      return {offset, end};
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (blocks_[a].floats != blocks_[b].floats) return blocks_[a].floats > blocks_[b].floats;
      return blocks_[a].first < blocks_[b].first;
    });
    std::vector<size_t> placed;
    std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, end) of placed blocks live meanwhile
    for (size_t b : order) {
      const Block& k = blocks_[b];
      if (k.floats == 0) continue;
      taken.clear();
      for (size_t p : placed)
        if (blocks_[p].first <= k.last && k.first <= blocks_[p].last)
          taken.emplace_back(offset[p], offset[p] + blocks_[p].floats);
      std::sort(taken.begin(), taken.end());
      int64_t at = 0;
      for (const auto& [lo, hi] : taken) {
        if (lo - at >= k.floats) break;
        at = std::max(at, hi);
      }
      offset[b] = at;
      end = std::max(end, at + k.floats);
      placed.push_back(b);
    }
    return {offset, end};
  }

 private:
  static constexpr int64_t kMostFloats = int64_t{1} << 56;
  std::vector<Block> blocks_;
  int64_t total_ = 0;
};

}  // namespace

ArenaLayout plan_step_arena(const backend::Backend& be, const Network& net, int64_t rows, bool reuse) {
  const size_t L = net.layers.size(), T = L + 1;
  const int iL = static_cast<int>(L);
  // The moments of a step: the batch gathered, each layer's forward, the loss, each layer's backward
  // (the last layer's first), and after the step (predict reads the output then).
  const int gathered = 0, loss = iL + 1, after = 2 * iL + 2;
  auto forward_at = [](size_t i) { return 1 + static_cast<int>(i); };
  auto backward_at = [&](size_t i) { return 2 * iL + 1 - static_cast<int>(i); };
  auto floats_of = [&](size_t t) {
    return checked_product({rows, num_elements(net.shapes[t])}, "a batch of tensor " + std::to_string(t));
  };

  // A tensor's gradient is needed when the layer that made it, or one before that, trains.
  std::vector<bool> needs_grad(T, false);
  for (size_t i = 0; i < L; ++i) {
    const Layer& layer = *net.layers[i];
    bool need = layer.trainable() && !layer.params().empty();
    for (int t : net.inputs[i]) need = need || needs_grad[static_cast<size_t>(t)];
    needs_grad[i + 1] = need;
  }
  needs_grad[L] = true;  // the loss always writes the output's gradient

  // Which layers read each tensor, in layer order.
  std::vector<std::vector<std::pair<size_t, size_t>>> consumers(T);  // (layer, input slot)
  for (size_t i = 0; i < L; ++i)
    for (size_t k = 0; k < net.inputs[i].size(); ++k)
      consumers[static_cast<size_t>(net.inputs[i][k])].push_back({i, k});

  Blocks blocks;
  ArenaLayout out;
  int64_t activation_floats = 0, gradient_floats = 0, workspace_floats = 0;
  auto block = [&](int64_t floats, int64_t& kind) {
    const int b = blocks.make(floats);
    kind += blocks.floats(b);
    return b;
  };
  // Block ids first (a reshape's output is its input's block, and so is its gradient), offsets last.
  std::vector<int> act(T, -1), grad(T, -1), ws_forward(L, -1), ws_backward(L, -1);
  std::vector<std::vector<int>> edge(L);
  std::vector<std::vector<std::pair<int, int>>> sums(L);  // (tensor, extra block)
  act[0] = block(floats_of(0), activation_floats);
  out.scratch.assign(L, 0);
  for (size_t i = 0; i < L; ++i) {
    const Layer& layer = *net.layers[i];
    act[i + 1] = net.passes_input_through(i) ? act[static_cast<size_t>(net.inputs[i].front())]
                                             : block(floats_of(i + 1), activation_floats);
    out.scratch[i] = std::max<int64_t>(layer.scratch_floats_on(be, rows), 0);
    out.scratch_floats += out.scratch[i];
    edge[i].assign(net.inputs[i].size(), -1);
  }
  // A layer that writes its input's gradient over its output's (Layer::writes_input_grad_in_place)
  // gets one block for both, where it alone writes that input's gradient (its first reader, whose
  // backward runs last) and the two are the same size: the block of the input's gradient, else -1.
  auto in_place_grad = [&](size_t i) {
    const Layer& layer = *net.layers[i];
    if (!layer.writes_input_grad_in_place() || net.inputs[i].size() != 1 || config::test_hooks().no_in_place_grads)
      return -1;
    const size_t s = static_cast<size_t>(net.inputs[i].front());
    return edge[i][0] == grad[s] && floats_of(s) == floats_of(i + 1) ? grad[s] : -1;
  };
  // Tensors in order: a tensor's gradient block is known before the edges that read into it.
  for (size_t t = 0; t < T; ++t) {
    if (t > 0) {
      if (net.passes_input_through(t - 1))
        grad[t] = edge[t - 1][0];  // a reshape's gradient is its input's (none if not needed)
      else if (needs_grad[t] && (grad[t] = in_place_grad(t - 1)) < 0)
        grad[t] = block(floats_of(t), gradient_floats);
    }
    if (grad[t] < 0) continue;
    // The first reader writes the gradient itself; later readers write their own blocks, added to
    // it after the first reader's backward, which runs last.
    const auto& readers = consumers[t];
    for (size_t c = 0; c < readers.size(); ++c) {
      const auto [layer, slot] = readers[c];
      if (c == 0) {
        edge[layer][slot] = grad[t];
      } else {
        const int extra = block(floats_of(t), gradient_floats);
        edge[layer][slot] = extra;
        sums[readers.front().first].push_back({static_cast<int>(t), extra});
      }
    }
  }
  for (size_t i = 0; i < L; ++i) {
    const int64_t ws = net.layers[i]->workspace_floats_on(be, rows);
    if (ws <= 0) continue;
    ws_forward[i] = block(ws, workspace_floats);
    // Apart, a layer keeps one workspace (as its own buffer would be); packed, backward's is a block
    // of its own, placed where that moment allows (not counted again among the buffers apart).
    int64_t counted_once = 0;
    ws_backward[i] = !reuse ? ws_forward[i] : grad[i + 1] >= 0 ? block(ws, counted_once) : -1;
  }

  // Every use of every block, moment by moment.
  blocks.use(act[0], gathered);
  for (size_t i = 0; i < L; ++i) {
    const int at = forward_at(i);
    for (int t : net.inputs[i]) blocks.use(act[static_cast<size_t>(t)], at);
    blocks.use(act[i + 1], at);
    blocks.use(ws_forward[i], at);
  }
  blocks.use(act[L], loss);
  blocks.use(grad[L], loss);
  blocks.use(act[L], after);
  for (size_t i = L; i-- > 0;) {
    if (grad[i + 1] < 0) continue;  // no backward: nothing before this layer trains
    const Layer& layer = *net.layers[i];
    const int at = backward_at(i);
    blocks.use(grad[i + 1], at);
    for (int e : edge[i]) blocks.use(e, at);
    const bool runs = !net.passes_input_through(i);  // an absorbed activation reads nothing
    if (runs && layer.backward_reads_input())
      for (int t : net.inputs[i]) blocks.use(act[static_cast<size_t>(t)], at);
    if (runs && layer.backward_reads_output()) blocks.use(act[i + 1], at);
    blocks.use(ws_backward[i], at);
    for (const auto& [t, extra] : sums[i]) {
      blocks.use(grad[static_cast<size_t>(t)], at);
      blocks.use(extra, at);
    }
  }

  const auto placed = blocks.place(reuse);
  const auto& offset = placed.first;
  const auto arena = placed.second;
  auto at = [&](int b) { return b < 0 ? ArenaLayout::kNone : offset[static_cast<size_t>(b)]; };
  out.act.resize(T);
  out.grad.resize(T);
  for (size_t t = 0; t < T; ++t) {
    out.act[t] = at(act[t]);
    out.grad[t] = at(grad[t]);
  }
  out.edge_grad.resize(L);
  out.sums_after.resize(L);
  out.forward_workspace.resize(L);
  out.backward_workspace.resize(L);
  for (size_t i = 0; i < L; ++i) {
    for (int e : edge[i]) out.edge_grad[i].push_back(at(e));
    for (const auto& [t, extra] : sums[i]) out.sums_after[i].push_back({t, at(extra)});
    out.forward_workspace[i] = at(ws_forward[i]);
    out.backward_workspace[i] = at(ws_backward[i]);
  }
  out.dead_after_forward.resize(L);
  out.dead_after_backward.resize(L);
  for (int b = 0; b < blocks.size(); ++b) {
    const int moment = blocks.last(b);
    const ArenaLayout::Span span{offset[static_cast<size_t>(b)], blocks.floats(b)};
    if (moment >= forward_at(0) && moment < loss)
      out.dead_after_forward[static_cast<size_t>(moment - forward_at(0))].push_back(span);
    else if (moment > loss && moment < after)
      out.dead_after_backward[static_cast<size_t>(2 * iL + 1 - moment)].push_back(span);
  }
  out.arena_floats = arena;
  out.activation_floats = activation_floats;
  out.gradient_floats = gradient_floats;
  out.workspace_floats = workspace_floats;
  return out;
}

}  // namespace kx::core
