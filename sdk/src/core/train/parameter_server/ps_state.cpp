// A parameter-server model's state between its replicas and the ps tasks: the chief hands the whole
// state (weights, optimizer slots, step count) to the ps tasks at the start of a fit and takes it back
// for validation and checkpoints; a worker pulls the weights before each batch and pushes its gradient.
#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/model_impl.hpp"
#include "core/train/parameter_server/ps_cluster.hpp"
#include "core/train/parameter_server/ps_shard.hpp"
#include "core/train/train_position.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

using distribute::PsCluster;
using distribute::PsHeader;
using distribute::PsKind;

PsHeader request(PsKind kind) {
  PsHeader h;
  h.kind = static_cast<uint32_t>(kind);
  return h;
}

// The spans of the arena that fall in [r.first, r.first + r.count), shard-relative.
std::vector<distribute::ShardSpan> spans_in(const std::vector<core::ArenaSpan>& spans, PsCluster::Range r) {
  std::vector<distribute::ShardSpan> in;
  for (const core::ArenaSpan& s : spans) {
    const int64_t first = std::max(s.first, r.first), last = std::min(s.first + s.count, r.first + r.count);
    if (first < last) in.push_back({first - r.first, last - first});
  }
  return in;
}

std::vector<float> part(const std::vector<float>& all, PsCluster::Range r) {
  if (all.empty()) return {};
  return std::vector<float>(all.begin() + r.first, all.begin() + r.first + r.count);
}

// body(j) for every ps j, side by side when there are several (each talks to its own ps).
void for_each_ps(const PsCluster& c, const std::function<void(int)>& body) {
  if (c.num_ps() == 1) return body(0);
  std::vector<std::future<void>> running;
  for (int j = 0; j < c.num_ps(); ++j) running.push_back(std::async(std::launch::async, body, j));
  for (std::future<void>& f : running) f.get();  // the first failure, after every one ended
}

// ps j's parameters (a reply's payload) into their range of params.
void take_shard(PsCluster& c, int j, int64_t num_params, const std::vector<char>& bytes, std::vector<float>& params) {
  const PsCluster::Range r = c.shard(j, num_params);
  require(static_cast<int64_t>(bytes.size()) == r.count * static_cast<int64_t>(sizeof(float)), Status::InvalidArgument,
          c.peers().describe(c.ps_rank(j)) + " holds another shard than this model's");
  std::memcpy(params.data() + r.first, bytes.data(), bytes.size());
}

}  // namespace

void Model::Impl::push_state_to_ps() {
  PsCluster& c = *strategy.parameter_servers();
  const std::vector<float> params = host_params(), m = host_slot(&Replica::slot_m), v = host_slot(&Replica::slot_v);
  const bool adam = optimizer.kind == OptimizerKind::Adam;
  for_each_ps(c, [&](int j) {
    const PsCluster::Range r = c.shard(j, net.num_params);
    distribute::ShardState s;
    s.optimizer = optimizer.kind;
    s.beta1 = optimizer.beta1;
    s.beta2 = optimizer.beta2;
    s.epsilon = optimizer.epsilon;
    s.momentum = optimizer.momentum;
    s.step = optimizer_steps;
    s.trained = spans_in(net.trained_spans(), r);
    s.state = spans_in(net.state_spans(), r);
    s.params = part(params, r);
    s.m = part(m, r);
    s.v = adam ? part(v, r) : std::vector<float>{};
    const std::vector<char> bytes = s.encode();
    PsHeader h = request(PsKind::Init);
    h.payload = bytes.size();
    c.call(c.ps_rank(j), h, bytes.data(), nullptr);
  });
}

void Model::Impl::pull_state_from_ps() {
  PsCluster& c = *strategy.parameter_servers();
  std::vector<float> params(static_cast<size_t>(net.num_params));
  std::vector<float> m(static_cast<size_t>(replicas.front().slot_m.floats()));
  std::vector<float> v(static_cast<size_t>(replicas.front().slot_v.floats()));
  std::vector<int64_t> steps(static_cast<size_t>(c.num_ps()));
  for_each_ps(c, [&](int j) {
    const PsCluster::Range r = c.shard(j, net.num_params);
    std::vector<char> bytes;
    c.call(c.ps_rank(j), request(PsKind::PullState), nullptr, &bytes);
    const distribute::ShardState s = distribute::ShardState::decode(bytes);
    require(static_cast<int64_t>(s.params.size()) == r.count, Status::InvalidArgument,
            c.peers().describe(c.ps_rank(j)) + " holds another shard than this model's");
    std::copy(s.params.begin(), s.params.end(), params.begin() + r.first);
    if (!m.empty() && !s.m.empty()) std::copy(s.m.begin(), s.m.end(), m.begin() + r.first);
    if (!v.empty() && !s.v.empty()) std::copy(s.v.begin(), s.v.end(), v.begin() + r.first);
    steps[static_cast<size_t>(j)] = s.step;
  });
  for (Replica& r : replicas) {
    r.be->to_device(params.data(), r.params.bytes(), r.params.data());
    if (!m.empty()) r.be->to_device(m.data(), r.slot_m.bytes(), r.slot_m.data());
    if (!v.empty()) r.be->to_device(v.data(), r.slot_v.bytes(), r.slot_v.data());
  }
  // Every push reaches every shard: once the workers are idle, the shards agree; the least is safe.
  optimizer_steps = *std::min_element(steps.begin(), steps.end());
}

void Model::Impl::pull_params_from_ps(std::vector<float>& params) {
  PsCluster& c = *strategy.parameter_servers();
  params.resize(static_cast<size_t>(net.num_params));
  for_each_ps(c, [&](int j) {
    std::vector<char> bytes;
    c.call(c.ps_rank(j), request(PsKind::Pull), nullptr, &bytes);
    take_shard(c, j, net.num_params, bytes, params);
  });
  set_params(params.data());
}

void Model::Impl::push_gradients_to_ps(const std::vector<float>& grads, double learning_rate) {
  PsCluster& c = *strategy.parameter_servers();
  std::vector<int64_t> steps(static_cast<size_t>(c.num_ps()));
  for_each_ps(c, [&](int j) {
    const PsCluster::Range r = c.shard(j, net.num_params);
    PsHeader h = request(PsKind::Push);
    h.x = learning_rate;
    h.payload = static_cast<uint64_t>(r.count) * sizeof(float);
    steps[static_cast<size_t>(j)] = c.call(c.ps_rank(j), h, grads.data() + r.first, nullptr).a;
  });
  optimizer_steps = steps.front();
}

void Model::Impl::say_goodbye_to_ps() {
  PsCluster& c = *strategy.parameter_servers();
  for_each_ps(c, [&](int j) { c.call(c.ps_rank(j), request(PsKind::Bye), nullptr, nullptr); });
}

void Model::Impl::end_ps_service() {
  PsCluster& c = *strategy.parameter_servers();
  for_each_ps(c, [&](int j) { c.call(c.ps_rank(j), request(PsKind::End), nullptr, nullptr); });
}

}  // namespace kx
