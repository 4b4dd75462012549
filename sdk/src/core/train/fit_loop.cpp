// fit, evaluate and predict: the loops around the static step plan.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>

#include "core/train/train_position.hpp"

#include "core/model/model_impl.hpp"
#include "core/callbacks/progress_bar.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {

bool is_integral(float v) { return std::isfinite(v) && v == std::floor(v); }

double safe_ratio(double num, double den) { return den > 0 ? num / den : std::nan(""); }

}  // namespace

void Model::Impl::check_dataset(const Dataset& d, const char* role) const {
  const std::string who = std::string(role) + " dataset";
  require(d.num_samples() > 0, Status::InvalidArgument, who + " is empty");
  const int64_t in = net.input_size();
  require(num_elements(d.x_shape()) == in, Status::InvalidArgument,
          who + " samples have shape " + to_string(d.x_shape()) + " (" + std::to_string(num_elements(d.x_shape())) +
              " values) but the model's input is " + to_string(net.shapes.front()) + " (" + std::to_string(in) +
              " values)");
  const int64_t outputs = net.output_size();
  const int64_t y_size = num_elements(d.y_shape());
  const DatasetStorage& s = d.storage();
  const std::vector<int64_t> idx = d.in_storage_order();
  if (loss_spec.kind == LossKind::SparseCategoricalCrossentropy) {
    require(y_size == 1, Status::InvalidArgument,
            who + ": sparse categorical cross-entropy needs one integer label per sample, labels have shape " +
                to_string(d.y_shape()));
    for (int64_t i : idx) {
      const float label = s.y[static_cast<size_t>(i)];
      require(is_integral(label) && label >= 0 && label < static_cast<float>(outputs), Status::InvalidArgument,
              who + ": label " + std::to_string(label) + " of sample " + std::to_string(i) + " is not a class in [0, " +
                  std::to_string(outputs) + ")");
    }
  } else {
    require(y_size == outputs, Status::InvalidArgument,
            who + ": " + loss_name(loss_spec.kind) + " needs " + std::to_string(outputs) +
                " target values per sample (the model's output), labels have shape " + to_string(d.y_shape()));
    for (int64_t i : idx)
      for (int64_t j = 0; j < y_size; ++j)
        require(std::isfinite(s.y[static_cast<size_t>(i * y_size + j)]), Status::InvalidArgument,
                who + ": sample " + std::to_string(i) + " has a non-finite target");
  }
}

Slice Model::Impl::slice(int replica, int64_t rows) const {
  // As even as possible: the first rows % n replicas get one row more.
  const int64_t n = static_cast<int64_t>(replicas.size()), k = replica;
  const int64_t base = rows / n, extra = rows % n;
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

void Model::Impl::reserve_plans(int64_t global_rows) {
  const int64_t n = static_cast<int64_t>(replicas.size());
  const int64_t per_replica = (global_rows + n - 1) / n;
  for (Replica& r : replicas) r.plan.reserve(*r.be, net, std::max(r.plan.capacity(), per_replica), label_size());
}

void Model::Impl::stage_dataset(const Dataset& data) {
  const std::shared_ptr<const DatasetStorage>& storage = data.shared_storage();
  for (Replica& r : replicas) {
    r.streamed.reset();
    if (always_stream_) {
      stream_dataset(r, storage);
      continue;
    }
    if (r.be->host_accessible()) {
      r.x_src = storage->x.data();
      r.y_src = storage->y.data();
      continue;
    }
    // Storage seen before is compared by owner: the address of a freed dataset may come back.
    auto same = [&](const CachedDataset& c) {
      return !c.storage.expired() && !c.storage.owner_before(storage) && !storage.owner_before(c.storage);
    };
    auto hit = std::find_if(r.cache.begin(), r.cache.end(), same);
    if (hit == r.cache.end()) {
      // Freed datasets go first; then the oldest, keeping the most recent other one (training data
      // while validating, and back).
      std::erase_if(r.cache, [](const CachedDataset& c) { return c.storage.expired(); });
      if (r.cache.size() >= kCachedDatasets) r.cache.erase(r.cache.begin());
      CachedDataset c;
      const size_t x_bytes = storage->x.size() * sizeof(float), y_bytes = storage->y.size() * sizeof(float);
      try {
        c.x = r.be->allocate(x_bytes);
        c.y = r.be->allocate(y_bytes);
      } catch (const Error& e) {
        if (e.status() != Status::OutOfMemory) throw;
        stream_dataset(r, storage);  // too large for the device: batch by batch
        continue;
      }
      r.be->to_device(storage->x.data(), x_bytes, c.x.data());
      r.be->to_device(storage->y.data(), y_bytes, c.y.data());
      c.storage = storage;
      r.cache.push_back(std::move(c));
      hit = r.cache.end() - 1;
    }
    r.x_src = hit->x.data();
    r.y_src = hit->y.data();
  }
}

void Model::Impl::stream_dataset(Replica& r, const std::shared_ptr<const DatasetStorage>& storage) {
  const int64_t rows = r.plan.capacity();
  if (!r.ring_x || r.ring_rows < rows) {
    r.ring_x.reset();
    r.ring_y.reset();
    r.ring_x = r.be->make_transfer_ring(Replica::kRingSlots, static_cast<size_t>(rows * net.input_size()) * sizeof(float));
    r.ring_y = r.be->make_transfer_ring(Replica::kRingSlots, static_cast<size_t>(rows * label_size()) * sizeof(float));
    r.ring_rows = rows;
    r.next_slot = 0;
  }
  r.streamed = storage;
  r.x_src = static_cast<const float*>(r.ring_x->device_slots());
  r.y_src = static_cast<const float*>(r.ring_y->device_slots());
}

void Model::Impl::feed_batch(Replica& r, const int64_t* idx, Slice s) {
  if (!r.streamed) {
    r.be->to_device(idx + s.first, static_cast<size_t>(s.rows) * sizeof(int64_t), r.plan.batch_index());
    return;
  }
  const int slot = r.next_slot;
  r.next_slot = (slot + 1) % Replica::kRingSlots;
  const int64_t in = net.input_size(), ls = label_size();
  r.ring_x->wait_host_writable(slot);
  r.ring_y->wait_host_writable(slot);
  auto* xs = static_cast<float*>(r.ring_x->host_slot(slot));
  auto* ys = static_cast<float*>(r.ring_y->host_slot(slot));
  const DatasetStorage& d = *r.streamed;
  r.ring_index.resize(static_cast<size_t>(s.rows));
  // The host fills the slot while the device still computes the step before (steps are queued, not
  // waited for); large batches are copied by every core, so the copy keeps up with the device.
  constexpr int64_t kParallelFloats = int64_t{1} << 18;
#pragma omp parallel for if (s.rows * (in + ls) >= kParallelFloats)
  for (int64_t i = 0; i < s.rows; ++i) {
    const auto row = static_cast<size_t>(idx[s.first + i]);
    std::memcpy(xs + i * in, d.x.data() + row * static_cast<size_t>(in), static_cast<size_t>(in) * sizeof(float));
    std::memcpy(ys + i * ls, d.y.data() + row * static_cast<size_t>(ls), static_cast<size_t>(ls) * sizeof(float));
    r.ring_index[static_cast<size_t>(i)] = slot * r.ring_rows + i;  // the step gathers from the slot
  }
  r.ring_x->upload(slot, static_cast<size_t>(s.rows * in) * sizeof(float));
  r.ring_y->upload(slot, static_cast<size_t>(s.rows * ls) * sizeof(float));
  r.be->to_device(r.ring_index.data(), static_cast<size_t>(s.rows) * sizeof(int64_t), r.plan.batch_index());
  r.fed_slot = slot;
}

void Model::Impl::release_batch(Replica& r) {
  if (!r.streamed || r.fed_slot < 0) return;
  r.ring_x->release(r.fed_slot);
  r.ring_y->release(r.fed_slot);
  r.fed_slot = -1;
}

void Model::Impl::replica_forward_loss(Replica& r, Slice s, bool training, float grad_scale) {
  const int64_t ls = label_size();
  r.be->gather_rows(r.x_src, net.input_size(), r.plan.batch_index(), s.rows, r.plan.input());
  r.be->gather_rows(r.y_src, ls, r.plan.batch_index(), s.rows, r.plan.labels());
  r.plan.forward(*r.be, net, r.params.data(), s.rows, training, r.step_seed(), s.first);
  r.be->loss(loss_spec, s.rows, net.output_size(), r.plan.output(), r.plan.labels(), ls, grad_scale,
             training ? r.plan.output_grad() : nullptr);
}

void Model::Impl::replica_forward_backward(Replica& r, Slice s, int64_t global_rows) {
  if (s.rows == 0) {  // nothing to learn from: a zero gradient
    r.be->fill_zero(r.grads.bytes(), r.grads.data());
    return;
  }
  // The loss is the mean over the global batch: every sample's gradient is scaled by 1/global_rows,
  // and the replicas' gradients are summed.
  replica_forward_loss(r, s, true, 1.0f / static_cast<float>(global_rows));
  r.plan.backward(*r.be, net, r.params.data(), r.grads.data(), s.rows,
                  static_cast<float>(s.rows) / static_cast<float>(global_rows));
}

backend::LossSums Model::Impl::take_loss_sums() {
  backend::LossSums total;
  for (Replica& r : replicas) {  // in replica order: repeatable sums
    const backend::LossSums s = r.be->take_loss_sums();
    total.loss += s.loss;
    total.correct += s.correct;
  }
  return total;
}

backend::StepValues Model::Impl::step_values(int64_t t) const {
  backend::StepValues v;
  v.seed = core::mix_seed(options.seed, static_cast<uint64_t>(t - 1));
  if (optimizer.kind == OptimizerKind::Adam) {
    const double td = static_cast<double>(t);
    v.learning_rate = static_cast<float>(learning_rate * std::sqrt(1 - std::pow(optimizer.beta2, td)) /
                                         (1 - std::pow(optimizer.beta1, td)));
  } else {
    v.learning_rate = static_cast<float>(learning_rate);
  }
  return v;
}

namespace {
// The parts a step is recorded in: all of it with one replica; with several, the forward and backward
// pass, then the all-reduce and update, so that a replica failing in the first never leaves the
// others waiting in the all-reduce.
enum StepPart : int { kWholeStep, kForwardBackward, kUpdate };
}  // namespace

template <class Body>
void Model::Impl::run_step_part(int k, int part, int64_t global_rows, Body&& body) {
  Replica& r = replicas[static_cast<size_t>(k)];
  const Slice s = slice(k, global_rows);
  const core::StepGraphKey key{part, s.first, s.rows, global_rows, r.plan.generation(), net.revision, r.x_src, r.y_src};
  r.graphs.run(*r.be, key, step_graphs_, body);
}

void Model::Impl::train_step(const int64_t* idx, int64_t rows) {
  // A layer frozen or unfrozen since the last step (by a callback) changes which gradients exist.
  refresh_spans();
  for (Replica& r : replicas) r.plan.reserve(*r.be, net, r.plan.capacity(), label_size());
  const int64_t t = optimizer_steps + 1;
  const backend::StepValues values = step_values(t);
  // Keras's EMA starts at the first step with a copy, unlike every later step: never recorded.
  const bool special = optimizer.use_ema && t == 1;
  auto prepare = [&](Replica& r, Slice s) {
    r.be->to_device(&values, sizeof values, r.step_values.data());
    if (s.rows > 0) feed_batch(r, idx, s);
  };
  if (!collective_) {
    Replica& r = replicas.front();
    prepare(r, slice(0, rows));
    auto body = [&] {
      replica_forward_backward(r, slice(0, rows), rows);
      replica_optimizer(r, t);
    };
    if (special)
      body();
    else
      run_step_part(0, kWholeStep, rows, body);
    release_batch(r);
  } else {
    for_each_replica([&](int k) {
      Replica& r = replicas[static_cast<size_t>(k)];
      const Slice s = slice(k, rows);
      prepare(r, s);
      run_step_part(k, kForwardBackward, rows, [&] { replica_forward_backward(r, s, rows); });
      release_batch(r);
    });
    // Cannot fail: the collective's barriers are safe to enter once every replica's backward succeeded.
    for_each_replica([&](int k) {
      Replica& r = replicas[static_cast<size_t>(k)];
      auto body = [&] {
        collective_->all_reduce_sum(k, *r.be, r.grads.data(), net.num_params);
        replica_optimizer(r, t);
      };
      if (special)
        body();
      else
        run_step_part(k, kUpdate, rows, body);
    });
  }
  optimizer_steps = t;
}

void Model::Impl::refresh_spans() {
  if (spans_revision_ == net.revision) return;
  trained_spans_ = net.trained_spans();
  state_spans_ = net.state_spans();
  spans_revision_ = net.revision;
}

void Model::Impl::replica_optimizer(Replica& r, int64_t t) {
  float* p = r.params.data();
  const float* g = r.grads.data();
  if (optimizer.kind == OptimizerKind::Adam) {
    for (const core::ArenaSpan& s : trained_spans_)
      r.be->adam_update(s.count, p + s.first, g + s.first, r.slot_m.data() + s.first, r.slot_v.data() + s.first,
                        r.learning_rate(), static_cast<float>(optimizer.beta1), static_cast<float>(optimizer.beta2),
                        static_cast<float>(optimizer.epsilon));
  } else {
    for (const core::ArenaSpan& s : trained_spans_)
      r.be->sgd_update(s.count, p + s.first, g + s.first, r.slot_m.empty() ? nullptr : r.slot_m.data() + s.first,
                       r.learning_rate(), static_cast<float>(optimizer.momentum));
  }
  // State such as moving statistics: its "gradient" is the step to subtract.
  for (const core::ArenaSpan& s : state_spans_) r.be->sgd_update(s.count, p + s.first, g + s.first, nullptr, r.one(), 0.0f);
  if (!optimizer.use_ema) return;
  float* ema = r.slot_ema.data();
  if (t == 1) {
    // Keras's first step: the average starts at the weights. All of them: a frozen layer's stay as
    // they are, so a layer unfrozen later starts its average at its weights too.
    r.be->copy(net.num_params, p, ema);
    return;
  }
  for (const core::ArenaSpan& s : trained_spans_) {
    // ema -= (1 - momentum) * (ema - p), the gradient arena (spent by now) holding the step.
    float* step = r.grads.data() + s.first;
    r.be->scaled_difference(s.count, static_cast<float>(1 - optimizer.ema_momentum), ema + s.first, p + s.first, step);
    r.be->sgd_update(s.count, ema + s.first, step, nullptr, r.one(), 0.0f);
  }
}

void Model::Impl::finalize_ema() {
  if (!optimizer.use_ema || optimizer_steps == 0) return;
  refresh_spans();
  for (Replica& r : replicas)
    for (const core::ArenaSpan& s : trained_spans_)
      r.be->copy(s.count, r.slot_ema.data() + s.first, r.params.data() + s.first);
}

namespace {

// The fit in progress, as the built-in callbacks see it.
class FitControl final : public TrainingControl {
 public:
  FitControl(Model::Impl& model, const Callbacks* callbacks, const Dataset& train, bool validation)
      : model_(model), callbacks_(callbacks), validation_(validation) {
    order = core::DataOrder::of(train);
  }

  // Sends e to every callback; true if one asked to stop.
  bool emit(const Event& e) { return callbacks_ && callbacks_->dispatch(e, *this); }

  void save_checkpoint(const std::string& path) override {
    if (before_save) before_save();  // the position's loss sums must include every step taken
    io::write_file_durably(path, model_.encode(&position, &order));
    Event e;
    e.kind = EventKind::CheckpointSaved;
    e.epoch = position.epoch;
    e.step = position.step_in_epoch;
    e.steps_per_epoch = position.steps_per_epoch;
    e.global_step = model_.optimizer_steps;
    e.path = path;
    emit(e);
  }
  std::vector<float> get_weights() const override { return model_.get_weights(); }
  void set_weights(const std::vector<float>& w) override { model_.set_weights(w); }
  double initial_learning_rate() const override { return model_.optimizer.learning_rate; }
  void set_learning_rate(double lr) override {
    require(std::isfinite(lr) && lr >= 0, Status::InvalidArgument, "learning rate must be finite and >= 0");
    model_.learning_rate = lr;
  }
  bool has_validation() const override { return validation_; }
  bool has_accuracy() const override { return model_.options.accuracy; }

  core::TrainPosition position;  // kept current by the loop: what a checkpoint written now records
  std::function<void()> before_save;  // reads the losses still on the device into position
  core::DataOrder order;

 private:
  Model::Impl& model_;
  const Callbacks* callbacks_;
  bool validation_;
};

}  // namespace

std::optional<io::SafetensorsFile> Model::Impl::find_checkpoint(const std::string& from, core::ProgressBar& bar) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(from, ec)) {
    bar.message("No checkpoint at " + from + ": starting fresh");
    return std::nullopt;
  }
  if (!fs::is_directory(from, ec)) {
    io::SafetensorsFile f = io::SafetensorsFile::decode(io::read_file(from), from);
    require(core::has_position(f), Status::InvalidArgument,
            from + " is a model file, not a checkpoint: load it with kx_model_load, or resume from a checkpoint");
    return f;
  }
  // Newest first by the step each file records; files that are not kx files at all are not candidates.
  std::vector<std::pair<int64_t, std::string>> candidates;
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file(ec) || path.ends_with(".tmp")) continue;
    const int64_t step = core::peek_global_step(path);
    if (step >= 0) candidates.emplace_back(step, path);
  }
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  for (const auto& [step, path] : candidates) {
    try {
      io::SafetensorsFile f = io::SafetensorsFile::decode(io::read_file(path), path);
      if (core::has_position(f)) return f;
    } catch (const Error& e) {
      if (e.status() != Status::Corrupt && e.status() != Status::Io) throw;
      bar.message(std::string("Skipping checkpoint ") + e.what());
    }
  }
  bar.message("No checkpoint in " + from + ": starting fresh");
  return std::nullopt;
}

Status Model::Impl::fit(Dataset& train, const FitOptions& o, const Callbacks* cb, History* history) {
  require_compiled("fit");
  require(o.epochs > 0, Status::InvalidArgument, "epochs must be positive, got " + std::to_string(o.epochs));
  require(o.initial_epoch >= 0, Status::InvalidArgument, "initial_epoch must be >= 0");
  require(o.steps_per_epoch >= 0, Status::InvalidArgument, "steps_per_epoch must be >= 0");
  require(o.validation_steps >= 0, Status::InvalidArgument, "validation_steps must be >= 0");
  require(o.verbose >= 0 && o.verbose <= 2, Status::InvalidArgument, "verbose must be 0, 1 or 2");
  check_dataset(train, "training");
  if (o.validation) check_dataset(*o.validation, "validation");
  const int64_t passes_steps = train.batches_per_pass();
  require(passes_steps > 0, Status::InvalidArgument,
          "the training dataset has fewer samples (" + std::to_string(train.num_samples()) + ") than one batch (" +
              std::to_string(train.batch_size()) + ") and drops the remainder");
  const int64_t steps = o.steps_per_epoch > 0 ? o.steps_per_epoch : passes_steps;
  const int64_t batch = train.batch_size();
  reserve_plans(std::min(batch, train.num_samples()));

  const bool accuracy = options.accuracy;
  core::ProgressBar bar(o.verbose, stdout);
  FitControl control(*this, cb, train, o.validation != nullptr);
  learning_rate = optimizer.learning_rate;

  // Batches come from a stream of passes over the data; pass p is shuffled with the seed of p, so the
  // order depends only on the dataset and how many batches came before.
  uint64_t pass = o.steps_per_epoch > 0 ? 0 : static_cast<uint64_t>(o.initial_epoch);
  int64_t pos = 0;  // next batch within the pass
  int32_t first_epoch = o.initial_epoch;
  int64_t first_step = 0;
  backend::LossSums sums;
  int64_t seen = 0;
  if (!o.resume_from.empty()) {
    if (std::optional<io::SafetensorsFile> f = find_checkpoint(o.resume_from, bar)) {
      const core::TrainPosition p = core::get_position(*f);
      require(p.steps_per_epoch == steps, Status::InvalidArgument,
              f->source() + " was written with " + std::to_string(p.steps_per_epoch) + " steps per epoch, this fit has " +
                  std::to_string(steps));
      const std::string data_diff = core::get_data_order(*f).difference(control.order);
      require(data_diff.empty(), Status::InvalidArgument,
              f->source() + " was written for other training data: " + data_diff);
      restore(*f);
      pass = p.data_pass;
      pos = p.data_position;
      require(pos <= passes_steps, Status::Corrupt, f->source() + ": data position beyond the pass");
      if (p.step_in_epoch == p.steps_per_epoch) {
        first_epoch = p.epoch + 1;
      } else {
        first_epoch = p.epoch;
        first_step = p.step_in_epoch;
        sums = {p.loss_sum, p.correct_sum};
        seen = p.seen;
      }
      bar.message("Resuming from " + f->source() + ": epoch " + std::to_string(first_epoch + 1) + ", batch " +
                  std::to_string(first_step) + "/" + std::to_string(steps) + ", step " +
                  std::to_string(optimizer_steps));
      if (first_epoch >= o.epochs) bar.message("Nothing left to train: all " + std::to_string(o.epochs) + " epochs are done");
    }
  }
  std::vector<int64_t> order = train.order(pass);
  take_loss_sums();  // nothing left over from a call that failed

  Event ev;
  ev.kind = EventKind::TrainBegin;
  ev.steps_per_epoch = steps;
  ev.global_step = optimizer_steps;
  bool stop = control.emit(ev);

  for (int epoch = first_epoch; epoch < o.epochs && !stop; ++epoch) {
    const int64_t start = epoch == first_epoch ? first_step : 0;
    if (epoch != first_epoch) sums = {}, seen = 0;
    ev = Event{};
    ev.kind = EventKind::EpochBegin;
    ev.epoch = epoch;
    ev.step = start;
    ev.steps_per_epoch = steps;
    ev.global_step = optimizer_steps;
    stop = control.emit(ev);
    bar.begin_epoch(epoch, o.epochs, steps, start);
    stage_dataset(train);  // again after the validation of the epoch before
    core::Metrics m;
    // The loss of a step stays on the device until something reads it (a GPU runs steps ahead of
    // the host meanwhile): a callback reading batch metrics, TerminateOnNaN, a redraw of the bar, a
    // checkpoint, the end of the epoch.
    const bool read_every_step = cb && cb->reads_batch_metrics();
    int64_t unread = 0;  // samples of the steps whose loss is not read yet
    double loss = std::nan(""), acc = std::nan("");
    auto read_loss = [&] {
      backend::LossSums read;
      if (unread == 0) return read;
      read = take_loss_sums();
      sums.loss += read.loss;
      sums.correct += read.correct;
      seen += unread;
      unread = 0;
      loss = sums.loss / static_cast<double>(seen);
      acc = accuracy ? sums.correct / static_cast<double>(seen) : std::nan("");
      control.position.loss_sum = sums.loss;
      control.position.correct_sum = sums.correct;
      control.position.seen = seen;
      return read;
    };
    control.before_save = read_loss;
    for (int64_t step = start; step < steps && !stop; ++step) {
      if (pos == passes_steps) {
        order = train.order(++pass);
        pos = 0;
      }
      const int64_t first = pos * batch;
      const int64_t rows = std::min(batch, train.num_samples() - first);
      train_step(order.data() + first, rows);
      ++pos;
      unread += rows;
      control.position = {epoch, step + 1, steps, pass, pos, sums.loss, sums.correct, seen};
      if (read_every_step || bar.due(step + 1) || step + 1 == steps) {
        const backend::LossSums read = read_loss();
        if (cb && cb->terminate_on_nan() && !std::isfinite(read.loss))
          fail(Status::Diverged, "the loss became " + std::to_string(read.loss) + " at epoch " +
                                     std::to_string(epoch + 1) + ", batch " + std::to_string(step + 1) +
                                     " (TerminateOnNaN); the last checkpoint written before it is intact");
        m.clear();
        if (accuracy) m.emplace_back("accuracy", acc);
        m.emplace_back("loss", loss);
        bar.update(step + 1, m);
      }
      if (cb && !cb->empty()) {
        ev = Event{};
        ev.kind = EventKind::BatchEnd;
        ev.epoch = epoch;
        ev.step = step + 1;
        ev.steps_per_epoch = steps;
        ev.global_step = optimizer_steps;
        ev.loss = loss;
        ev.accuracy = acc;
        stop = control.emit(ev);
      }
    }
    read_loss();  // a callback stopped the epoch early
    control.before_save = nullptr;
    ev = Event{};
    ev.kind = EventKind::EpochEnd;
    ev.epoch = epoch;
    ev.step = steps;
    ev.steps_per_epoch = steps;
    ev.global_step = optimizer_steps;
    ev.loss = safe_ratio(sums.loss, static_cast<double>(seen));
    ev.accuracy = accuracy ? safe_ratio(sums.correct, static_cast<double>(seen)) : std::nan("");
    if (history) {
      history->record("loss", ev.loss);
      if (accuracy) history->record("accuracy", ev.accuracy);
    }
    if (o.validation && !stop) {
      Dataset val = o.validation_steps > 0 ? o.validation->take(o.validation_steps * o.validation->batch_size())
                                           : *o.validation;
      const EvalResult r = evaluate_checked(val);  // checked once, before the first epoch
      ev.val_loss = r.loss;
      ev.val_accuracy = r.accuracy;
      if (accuracy) m.emplace_back("val_accuracy", r.accuracy);
      m.emplace_back("val_loss", r.loss);
      if (history) {
        history->record("val_loss", r.loss);
        if (accuracy) history->record("val_accuracy", r.accuracy);
      }
    }
    if (history) history->finish_epoch(epoch);
    bar.end_epoch(m);
    control.position = {epoch, steps, steps, pass, pos, sums.loss, sums.correct, seen};
    stop = control.emit(ev) || stop;
  }
  finalize_ema();  // before TrainEnd, as Keras: EarlyStopping's restored weights win
  ev = Event{};
  ev.kind = EventKind::TrainEnd;
  ev.steps_per_epoch = steps;
  ev.global_step = optimizer_steps;
  control.emit(ev);
  return stop ? Status::Stopped : Status::Ok;
}

EvalResult Model::Impl::evaluate(const Dataset& data) {
  require_compiled("evaluate");
  check_dataset(data, "evaluation");
  return evaluate_checked(data);
}

EvalResult Model::Impl::evaluate_checked(const Dataset& data) {
  const int64_t batch = std::min(data.batch_size(), data.num_samples());
  reserve_plans(batch);
  stage_dataset(data);
  take_loss_sums();  // nothing left over from a call that failed
  const std::vector<int64_t> idx = data.in_storage_order();  // evaluation does not depend on shuffling
  for (int64_t first = 0; first < data.num_samples(); first += batch) {
    const int64_t rows = std::min(batch, data.num_samples() - first);
    for_each_replica([&](int k) {
      Replica& r = replicas[static_cast<size_t>(k)];
      const Slice part = slice(k, rows);
      if (part.rows == 0) return;
      feed_batch(r, idx.data() + first, part);
      replica_forward_loss(r, part, false, 0.0f);
      release_batch(r);
    });
  }
  const backend::LossSums sums = take_loss_sums();
  const double n = static_cast<double>(data.num_samples());
  return {sums.loss / n, sums.correct / n};
}

void Model::Impl::predict(const float* x, int64_t n, float* out) {
  require_compiled("predict");
  require(n >= 0, Status::InvalidArgument, "predict needs n_samples >= 0");
  require(n == 0 || (x && out), Status::InvalidArgument, "predict needs input and output buffers");
  const int64_t in = net.input_size(), outs = net.output_size();
  Replica& r = replicas.front();
  const int64_t batch = std::max<int64_t>(r.plan.capacity(), Dataset::kDefaultBatch);
  r.plan.reserve(*r.be, net, batch, label_size());
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t rows = std::min(batch, n - first);
    r.be->to_device(x + first * in, static_cast<size_t>(rows * in) * sizeof(float), r.plan.input());
    r.plan.forward(*r.be, net, r.params.data(), rows, false, r.step_seed());
    // A softmax/sigmoid folded into the loss for training is applied here: predict gives probabilities.
    r.be->activation_forward(net.folded_activation(), rows, outs, r.plan.output());
    r.be->to_host(r.plan.output(), static_cast<size_t>(rows * outs) * sizeof(float), out + first * outs);
  }
}

}  // namespace kx
