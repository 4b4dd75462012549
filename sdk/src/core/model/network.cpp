#include "core/model/network.hpp"

#include <algorithm>

#include "kx/error.hpp"

namespace kx::core {

int Network::layer_index(const std::string& name) const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i]->name() == name) return static_cast<int>(i);
  return -1;
}

namespace {

// How many layers read each tensor.
std::vector<int> reader_counts(const Network& net) {
  std::vector<int> readers(net.layers.size() + 1, 0);
  for (const std::vector<int>& in : net.inputs)
    for (int t : in) ++readers[static_cast<size_t>(t)];
  return readers;
}

}  // namespace

void Network::fuse_activations() {
  const size_t L = layers.size();
  fused_activation.assign(L, Activation::None);
  const std::vector<int> readers = reader_counts(*this);
  for (size_t j = 0; j + 1 < L; ++j) {
    const Activation act = layers[j]->fusable_activation();
    if (act == Activation::None || inputs[j].size() != 1 || inputs[j][0] == 0) continue;
    const size_t t = static_cast<size_t>(inputs[j][0]), producer = t - 1;
    if (readers[t] != 1 || !layers[producer]->applies_fused_activation()) continue;
    fused_activation[producer] = act;
  }
}

void Network::absorb_paddings() {
  const size_t L = layers.size();
  padding_absorbed.assign(L, false);
  const std::vector<int> readers = reader_counts(*this);
  for (size_t j = 0; j < L; ++j) {
    if (!layers[j]->absorbs_input_padding() || inputs[j].size() != 1 || inputs[j][0] == 0) continue;
    const size_t t = static_cast<size_t>(inputs[j][0]), producer = t - 1;
    if (readers[t] != 1 || layers[producer]->spec().kind != LayerKind::ZeroPadding2D) continue;
    padding_absorbed[producer] = true;
  }
}

void Network::share_moments() {
  const size_t L = layers.size();
  moments_reader.assign(L, -1);
  const std::vector<int> readers = reader_counts(*this);
  for (size_t j = 0; j < L; ++j) {
    if (layers[j]->spec().kind != LayerKind::BatchNormalization || inputs[j].size() != 1 || inputs[j][0] == 0) continue;
    const size_t t = static_cast<size_t>(inputs[j][0]), producer = t - 1;
    if (readers[t] != 1 || !layers[producer]->writes_output_moments()) continue;
    moments_reader[producer] = static_cast<int>(j);
  }
}

bool Network::is_chain() const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (inputs[i].size() != 1 || inputs[i][0] != static_cast<int>(i) || layers[i]->inputs_as_arguments()) return false;
  // Keras's Sequential models hold layers only: operations on tensors make a model functional.
  for (const auto& l : layers)
    if (l->spec().kind == LayerKind::TensorOperation) return false;
  return true;
}

namespace {

// Appends [first, first + count) to spans, merging with the last span where they touch.
void append_span(std::vector<ArenaSpan>& spans, int64_t first, int64_t count) {
  if (count == 0) return;
  if (!spans.empty() && spans.back().first + spans.back().count == first)
    spans.back().count += count;
  else
    spans.push_back({first, count});
}

std::vector<ArenaSpan> spans_where(const Network& net, bool want_trainable) {
  std::vector<ArenaSpan> spans;
  for (size_t i = 0; i < net.layers.size(); ++i) {
    if (!net.layers[i]->trainable()) continue;
    int64_t at = net.param_offset[i];
    for (const ParamSpec& p : net.layers[i]->params()) {
      const int64_t n = num_elements(p.shape);
      if (p.trainable == want_trainable) append_span(spans, at, n);
      at += n;
    }
  }
  return spans;
}

}  // namespace

std::vector<ArenaSpan> Network::trained_spans() const { return spans_where(*this, true); }
std::vector<ArenaSpan> Network::state_spans() const { return spans_where(*this, false); }

void Network::require_connected() const {
  std::vector<bool> used(layers.size() + 1, false);
  used[layers.size()] = true;
  for (size_t i = layers.size(); i-- > 0;)
    if (used[i + 1])
      for (int t : inputs[i]) used[static_cast<size_t>(t)] = true;
  for (size_t i = 0; i < layers.size(); ++i)
    require(used[i + 1], Status::InvalidArgument,
            "layer \"" + layers[i]->name() + "\" does not lead to the model's output (the last layer, \"" +
                layers.back()->name() + "\"); kx models have one output");
}

int64_t Network::num_trainable_params() const {
  int64_t n = 0;
  for (const ArenaSpan& s : trained_spans()) n += s.count;
  return n;
}

std::vector<int> Network::keras_layer_order() const {
  const int n = static_cast<int>(layers.size());
  if (n == 0) return {};
  // Layers come in topological order, so one backward sweep settles every depth.
  std::vector<int> depth(static_cast<size_t>(n), -1);
  depth.back() = 0;
  for (int i = n - 1; i >= 0; --i)
    for (int t : inputs[static_cast<size_t>(i)])
      if (t > 0) depth[static_cast<size_t>(t - 1)] = std::max(depth[static_cast<size_t>(t - 1)], depth[static_cast<size_t>(i)] + 1);
  // Keras's traversal index: pre-order from the output, each layer's inputs in order.
  std::vector<int> visit(static_cast<size_t>(n), -1);
  std::vector<int> stack{n - 1};
  int next = 0;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    if (visit[static_cast<size_t>(i)] >= 0) continue;
    visit[static_cast<size_t>(i)] = next++;
    const std::vector<int>& in = inputs[static_cast<size_t>(i)];
    for (auto t = in.rbegin(); t != in.rend(); ++t)  // reversed: the first input is walked first
      if (*t > 0 && visit[static_cast<size_t>(*t - 1)] < 0) stack.push_back(*t - 1);
  }
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    if (depth[ua] != depth[ub]) return depth[ua] > depth[ub];
    return visit[ua] < visit[ub];
  });
  return order;
}

}  // namespace kx::core
