#include "core/train/step_runner.hpp"

#include <cmath>
#include <utility>

#include "backend/adam_math.hpp"
#include "backend/optimizer_math.hpp"
#include "core/model/model_impl.hpp"

namespace kx::core {

StepRunner::StepRunner(std::unique_ptr<distribute::Collective> collective, bool record_graphs)
    : collective_(std::move(collective)), record_graphs_(record_graphs) {}

void replica_forward_loss(Model::Impl& m, Replica& r, Slice s, bool training, float grad_scale) {
  const int64_t ls = m.label_size();
  r.be->gather_rows(r.feed.samples(), m.net.input_size(), r.plan.batch_index(), s.rows, r.plan.input());
  r.be->gather_rows(r.feed.labels(), ls, r.plan.batch_index(), s.rows, r.plan.labels());
  // Keras's sample weights, one per sample (the loss weighs each of a sample's positions by it).
  const float* weights = nullptr;
  if (r.feed.weights()) {
    r.be->gather_rows(r.feed.weights(), 1, r.plan.batch_index(), s.rows, r.plan.weights());
    weights = r.plan.weights();
  }
  r.plan.forward(*r.be, m.net, r.params.data(), s.rows, training, r.step_seed(), s.first, m.pass_precision(r));
  // Each position of a sample is a row of the loss; a sample's loss is their mean (take_loss_sums
  // divides the sums by the positions).
  const int64_t positions = m.loss_positions;
  backend::LossSpec spec = m.loss_spec;
  if (const float* mask = r.plan.output_mask()) {
    // Keras's apply_mask: each position weighs its sample's weight times its mask, and the loss is
    // normalised by the unmasked positions counted here (StepRunner::update, Model::take_loss_sums).
    if (weights) {
      backend::BinaryShape times_weight;
      times_weight.op = backend::BinaryOp::Multiply;
      times_weight.dims[0] = times_weight.a_dims[0] = positions;
      times_weight.b_dims[0] = 1;
      r.be->binary_forward(times_weight, s.rows, mask, weights, r.plan.mask_weights());
      weights = r.plan.mask_weights();
    } else {
      weights = mask;
    }
    spec.positions = 1;  // a weight per position
    r.be->bias_grad(s.rows * positions, 1, mask, r.plan.mask_counts());
  }
  r.be->loss(spec, s.rows * positions, m.net.output_size() / positions, r.plan.output(), r.plan.labels(),
             ls / positions, weights, grad_scale / static_cast<float>(positions),
             training ? r.plan.output_grad() : nullptr);
  if (!training || m.rounding() == backend::Rounding::None) return;
  // The loss (and its softmax) is float32; the gradient reaching the model's output is a 16-bit tensor,
  // of the scaled loss under float16's loss scaling.
  const int64_t n = s.rows * m.net.output_size();
  if (m.loss_scaling()) r.be->multiply_by(n, &r.loss_scale_state()->scale, r.plan.output_grad());
  r.be->round_to(m.rounding(), n, r.plan.output_grad(), r.plan.output_grad());
}

void StepRunner::forward_backward(Model::Impl& m, Replica& r, Slice s, int64_t global_rows) const {
  float* counts = r.plan.mask_counts();
  if (s.rows == 0) {  // nothing to learn from: a zero gradient
    r.be->fill_zero(r.grads.bytes(), r.grads.data());
    if (r.plan.output_mask()) r.be->fill_zero(2 * sizeof(float), counts);
    return;
  }
  // The loss is the mean over the global batch: every sample's gradient is scaled by 1/global_rows,
  // and the replicas' gradients are summed.
  m.round_params(r);  // once per step: every layer's GEMMs read these
  replica_forward_loss(m, r, s, true, 1.0f / static_cast<float>(global_rows));
  if (r.plan.output_mask()) r.be->copy(1, counts, counts + 1);  // the global count, once summed
  r.plan.backward(*r.be, m.net, r.params.data(), r.grads.data(), s.rows,
                  static_cast<float>(s.rows) / static_cast<float>(global_rows), m.pass_precision(r));
}

backend::StepValues StepRunner::step_values(const Model::Impl& m, int64_t t) const {
  backend::StepValues v;
  v.seed = mix_seed(m.options.seed, static_cast<uint64_t>(t - 1));
  const OptimizerConfig& o = m.optimizer;
  // The learning rate is a float32 variable in Keras; schedules set it in double here.
  v.base_learning_rate = static_cast<float>(m.learning_rate);
  v.learning_rate = o.adam_family() ? backend::adam_rate(v.base_learning_rate, o.beta1, o.beta2, t)
                                    : v.base_learning_rate;
  return v;
}

StepGraphKey StepRunner::graph_key(Model::Impl& m, int k, Part part, int64_t global_rows) const {
  Replica& r = m.replicas[static_cast<size_t>(k)];
  const Slice s = m.slice(k, global_rows);
  return {part, s.first, s.rows, global_rows, r.plan.generation(), m.net.revision, r.feed.samples(), r.feed.labels(),
          r.feed.weights()};
}

template <class Body>
void StepRunner::run_part(Model::Impl& m, int k, Part part, int64_t global_rows, Body&& body) {
  Replica& r = m.replicas[static_cast<size_t>(k)];
  r.graphs.run(*r.be, graph_key(m, k, part, global_rows), record_graphs_, body);
}

void StepRunner::run(Model::Impl& m, const int64_t* idx, int64_t rows) {
  // A layer frozen or unfrozen since the last step (by a callback) changes which gradients exist.
  refresh_spans(m.net);
  for (Replica& r : m.replicas) r.plan.reserve(*r.be, m.net, r.plan.capacity(), m.label_size());
  const int64_t t = m.optimizer_steps + 1;
  const backend::StepValues values = step_values(m, t);
  // Keras's EMA starts at the first step with a copy, unlike every later step: never recorded.
  const bool special = m.optimizer.use_ema && t == 1;
  auto prepare = [&](Replica& r, Slice s) {
    r.be->to_device(&values, sizeof values, r.step_values.data());
    if (s.rows > 0) r.feed.feed(*r.be, idx, s, r.plan.batch_index());
  };
  if (!collective_) {
    Replica& r = m.replicas.front();
    const Slice s = m.slice(0, rows);
    prepare(r, s);
    auto body = [&] {
      forward_backward(m, r, s, rows);
      update(m, r, t, rows);
    };
    if (special)
      body();
    else
      run_part(m, 0, kWholeStep, rows, body);
    r.feed.release();
  } else {
    m.for_each_replica([&](int k) {
      Replica& r = m.replicas[static_cast<size_t>(k)];
      const Slice s = m.slice(k, rows);
      prepare(r, s);
      run_part(m, k, kForwardBackward, rows, [&] { forward_backward(m, r, s, rows); });
      r.feed.release();
    });
    auto all_reduce_and_update = [&](int k) {
      Replica& r = m.replicas[static_cast<size_t>(k)];
      collective_->all_reduce_sum(k, *r.be, r.grads.data(), m.net.num_params);
      if (r.plan.output_mask()) collective_->all_reduce_sum(k, *r.be, r.plan.mask_counts() + 1, 1);
      update(m, r, t, rows);
    };
    // The collective's barriers are safe to enter once every replica's backward succeeded, and once
    // every replica that records this part has recorded it: all record first, so that a recording
    // that throws (out of memory) leaves no replica waiting in the all-reduce.
    bool recording_due = false;
    for (int k = 0; k < static_cast<int>(m.replicas.size()) && !special && !recording_due; ++k)
      recording_due = m.replicas[static_cast<size_t>(k)].graphs.recording_due(graph_key(m, k, kUpdate, rows),
                                                                             record_graphs_);
    if (recording_due)
      m.for_each_replica([&](int k) {
        Replica& r = m.replicas[static_cast<size_t>(k)];
        r.graphs.record_if_due(*r.be, graph_key(m, k, kUpdate, rows), record_graphs_,
                               [&] { all_reduce_and_update(k); });
      });
    m.for_each_replica([&](int k) {
      if (special)
        all_reduce_and_update(k);
      else
        run_part(m, k, kUpdate, rows, [&] { all_reduce_and_update(k); });
    });
  }
  // A loss-scaled step whose gradients overflowed was skipped: as Keras's LossScaleOptimizer, it does not
  // count as an optimizer iteration (Adam's next step is still t).
  if (!m.loss_scaling() || m.host_loss_scale().applied != 0.0f) m.optimizer_steps = t;
  look_for_fallback(m);
}

void StepRunner::gradients(Model::Impl& m, const int64_t* idx, int64_t rows, int64_t t) {
  for (Replica& r : m.replicas) r.plan.reserve(*r.be, m.net, r.plan.capacity(), m.label_size());
  const backend::StepValues values = step_values(m, t);
  m.for_each_replica([&](int k) {
    Replica& r = m.replicas[static_cast<size_t>(k)];
    const Slice s = m.slice(k, rows);
    r.be->to_device(&values, sizeof values, r.step_values.data());
    if (s.rows > 0) r.feed.feed(*r.be, idx, s, r.plan.batch_index());
    forward_backward(m, r, s, rows);
    r.feed.release();
  });
  // Every replica's backward succeeded: the collective's barriers are safe to enter.
  if (collective_)
    m.for_each_replica([&](int k) {
      Replica& r = m.replicas[static_cast<size_t>(k)];
      collective_->all_reduce_sum(k, *r.be, r.grads.data(), m.net.num_params);
    });
}

void StepRunner::refresh_spans(const Network& net) {
  if (spans_revision_ == net.revision) return;
  trained_spans_ = net.trained_spans();
  state_spans_ = net.state_spans();
  spans_revision_ = net.revision;
}

void StepRunner::update(Model::Impl& m, Replica& r, int64_t t, int64_t global_rows) const {
  const OptimizerConfig& o = m.optimizer;
  float* p = r.params.data();
  float* g = r.grads.data();
  if (r.plan.output_mask()) {
    // Keras's sum_over_batch_size under a mask: the loss's gradient, scaled by 1 / (every position),
    // times every position / the unmasked ones (divide_no_nan: a batch fully masked has a zero
    // gradient, which the epsilon keeps finite, and is exact beside any count from 1).
    float* counts = r.plan.mask_counts();
    backend::BinaryShape f;
    f.op = backend::BinaryOp::Add;
    f.scalar_operand = 1;
    f.scalar = 1e-20f;
    f.dims[0] = f.a_dims[0] = f.b_dims[0] = 1;
    r.be->binary_forward(f, 1, counts + 1, nullptr, counts + 2);
    f.op = backend::BinaryOp::Divide;
    f.scalar_operand = 0;
    f.scalar = static_cast<float>(global_rows * m.loss_positions);
    r.be->binary_forward(f, 1, nullptr, counts + 2, counts + 3);
    for (const ArenaSpan& s : trained_spans_) r.be->multiply_by(s.count, counts + 3, g + s.first);
  }
  // Loss scaling: the summed gradients are checked, then divided by the scale, or the whole update
  // (moving statistics and EMA included) is skipped when one of them is not finite.
  const float* unscale = nullptr;
  const float* applied = nullptr;
  if (m.loss_scaling()) {
    backend::LossScaleState* ls = r.loss_scale_state();
    for (const ArenaSpan& s : trained_spans_) r.be->loss_scale_check(s.count, g + s.first, ls);
    for (const ArenaSpan& s : state_spans_) r.be->loss_scale_check(s.count, g + s.first, ls);
    r.be->loss_scale_update(ls);
    unscale = &ls->grad_factor;
    applied = &ls->applied;
  }
  const auto slot = [](const backend::DeviceBuffer& b, int64_t first) { return b.empty() ? nullptr : b.data() + first; };
  if (o.kind == OptimizerKind::Adam) {
    for (const ArenaSpan& s : trained_spans_)
      r.be->adam_update(s.count, p + s.first, g + s.first, r.slot_m.data() + s.first, r.slot_v.data() + s.first,
                        r.learning_rate(), backend::adam_one_minus(o.beta1), backend::adam_one_minus(o.beta2),
                        static_cast<float>(o.epsilon), unscale);
  } else if (o.kind == OptimizerKind::AdamW) {
    for (const ArenaSpan& s : trained_spans_)
      r.be->adamw_update(s.count, p + s.first, g + s.first, r.slot_m.data() + s.first, r.slot_v.data() + s.first,
                         r.learning_rate(), r.base_learning_rate(), static_cast<float>(o.weight_decay),
                         backend::adam_one_minus(o.beta1), backend::adam_one_minus(o.beta2),
                         static_cast<float>(o.epsilon), unscale);
  } else if (o.kind == OptimizerKind::RmsProp) {
    const backend::RmsPropConstants c = backend::rmsprop_constants(o.rho, o.momentum, o.epsilon);
    for (const ArenaSpan& s : trained_spans_)
      r.be->rmsprop_update(s.count, p + s.first, g + s.first, r.slot_v.data() + s.first, slot(r.slot_m, s.first),
                           slot(r.slot_a, s.first), r.learning_rate(), c, unscale);
  } else {
    for (const ArenaSpan& s : trained_spans_)
      r.be->sgd_update(s.count, p + s.first, g + s.first, r.slot_m.empty() ? nullptr : r.slot_m.data() + s.first,
                       r.learning_rate(), static_cast<float>(o.momentum), unscale);
  }
  // State such as moving statistics: its "gradient" is the step to subtract.
  for (const ArenaSpan& s : state_spans_)
    r.be->sgd_update(s.count, p + s.first, g + s.first, nullptr, r.one(), 0.0f, applied);
  if (!o.use_ema) return;
  float* ema = r.slot_ema.data();
  if (t == 1) {
    // Keras's first step: the average starts at the weights. All of them: a frozen layer's stay as
    // they are, so a layer unfrozen later starts its average at its weights too.
    r.be->copy(m.net.num_params, p, ema);
    return;
  }
  for (const ArenaSpan& s : trained_spans_) {
    // ema -= (1 - momentum) * (ema - p), the gradient arena (spent by now) holding the step.
    float* step = r.grads.data() + s.first;
    r.be->scaled_difference(s.count, static_cast<float>(1 - o.ema_momentum), ema + s.first, p + s.first, step);
    r.be->sgd_update(s.count, ema + s.first, step, nullptr, r.one(), 0.0f, applied);
  }
}

void StepRunner::finalize_ema(Model::Impl& m) {
  if (!m.optimizer.use_ema || m.optimizer_steps == 0) return;
  refresh_spans(m.net);
  for (Replica& r : m.replicas)
    for (const ArenaSpan& s : trained_spans_)
      r.be->copy(s.count, r.slot_ema.data() + s.first, r.params.data() + s.first);
}

void StepRunner::look_for_fallback(const Model::Impl& m) {
  if (fallback_seen_) return;
  for (const Replica& r : m.replicas) {
    if (r.graphs.failure().empty()) continue;
    fallback_seen_ = true;
    fallback_notice_ = "Recording the training step failed (" + r.graphs.failure() +
                       "): every step runs directly from now on, with the same results";
    return;
  }
}

std::string StepRunner::take_fallback_notice() { return std::exchange(fallback_notice_, std::string()); }

}  // namespace kx::core
