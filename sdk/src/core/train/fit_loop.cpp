// fit: the Keras loop of epochs and steps, with its callbacks, progress bar and validation, around the
// step runner (one training step on every replica), the replicas' data feeds and resume.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/callbacks/progress_bar.hpp"
#include "core/model/model_impl.hpp"
#include "core/train/batch_stream.hpp"
#include "core/train/class_weights.hpp"
#include "core/train/resume.hpp"
#include "core/train/train_position.hpp"
#include "distribute/ps_cluster.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {

double safe_ratio(double num, double den) { return den > 0 ? num / den : std::nan(""); }

// The running loss (and accuracy) of the epoch in progress. A step's loss stays on the device until
// something reads it, a GPU running steps ahead of the host meanwhile: a callback reading batch
// metrics, TerminateOnNaN, a redraw of the bar, a checkpoint, the end of the epoch.
class EpochLoss {
 public:
  EpochLoss(Model::Impl& model, bool accuracy) : model_(model), accuracy_(accuracy) {}

  // A new epoch, from these sums (a checkpoint's, when it resumes part-way).
  void begin(backend::LossSums sums, int64_t seen) {
    sums_ = sums;
    seen_ = seen;
    unread_ = 0;
    loss_ = acc_ = std::nan("");
  }
  void add_step(int64_t rows) { unread_ += rows; }
  int64_t unread() const { return unread_; }
  // Reads the sums of the steps not read yet and returns them (zero when every step was read).
  backend::LossSums read() {
    backend::LossSums read;
    if (unread_ == 0) return read;
    read = model_.take_loss_sums();
    sums_ += read;
    seen_ += unread_;
    unread_ = 0;
    // Keras: the loss is the weighted sum over the samples, the accuracy the weighted mean.
    loss_ = sums_.loss / static_cast<double>(seen_);
    acc_ = accuracy_ ? sums_.accuracy() : std::nan("");
    return read;
  }
  // The epoch's means as of the last read (NaN before the first), as the progress bar shows them.
  double loss() const { return loss_; }
  double accuracy() const { return acc_; }
  void write_metrics(core::Metrics& m) const {
    m.clear();
    if (accuracy_) m.emplace_back("accuracy", acc_);
    m.emplace_back("loss", loss_);
  }
  // The epoch's means over what was read (NaN when nothing was).
  double mean_loss() const { return safe_ratio(sums_.loss, static_cast<double>(seen_)); }
  double mean_accuracy() const {
    return accuracy_ && seen_ > 0 ? sums_.accuracy() : std::nan("");
  }
  // The sums over every worker's samples (collective; nothing changes with one worker).
  void combine_workers() {
    if (!model_.multi_worker()) return;
    sums_ = model_.sum_across_workers(sums_, &seen_);
    loss_ = mean_loss();
    acc_ = mean_accuracy();
  }
  // Into a training position, as a checkpoint records it.
  void write_sums(core::TrainPosition& p) const {
    p.loss_sum = sums_.loss;
    p.correct_sum = sums_.correct;
    p.weight_sum = sums_.weight;
    p.seen = seen_;
  }

 private:
  Model::Impl& model_;
  bool accuracy_;
  backend::LossSums sums_;
  int64_t seen_ = 0;
  int64_t unread_ = 0;  // samples of the steps whose loss is not read yet
  double loss_ = std::nan(""), acc_ = std::nan("");
};

// The fit in progress, as the built-in callbacks see it.
class FitControl final : public TrainingControl {
 public:
  FitControl(Model::Impl& model, const Callbacks* callbacks, const Dataset& train, bool validation, int64_t steps)
      : loss(model, model.options.accuracy),
        order(core::DataOrder::of(train)),
        model_(model),
        callbacks_(callbacks),
        validation_(validation),
        steps_(steps) {}

  // An event of this fit: its kind and place, with the steps per epoch and the global step.
  Event event(EventKind kind, int32_t epoch = -1, int64_t step = -1) const {
    Event e;
    e.kind = kind;
    e.epoch = epoch;
    e.step = step;
    e.steps_per_epoch = steps_;
    e.global_step = model_.optimizer_steps;
    e.learning_rate = model_.learning_rate;
    return e;
  }
  // Sends e to every callback; true if one asked to stop.
  bool emit(const Event& e) { return callbacks_ && callbacks_->dispatch(e, *this); }

  void save_checkpoint(const std::string& path) override {
    loss.read();  // the checkpoint's loss sums include every step taken
    core::TrainPosition p = position;
    loss.write_sums(p);
    io::write_file_durably(path, model_.encode(&p, &order));
    Event e = event(EventKind::CheckpointSaved, position.epoch, position.step_in_epoch);
    e.path = path;
    emit(e);
  }
  std::vector<float> get_weights() const override { return model_.get_weights(); }
  void set_weights(const std::vector<float>& w) override {
    model_.set_weights(w);
    weights_changed_ = true;
  }
  // Whether a callback replaced weights since the last call.
  bool take_weights_changed() { return std::exchange(weights_changed_, false); }
  double initial_learning_rate() const override { return model_.optimizer.learning_rate.value_or(0); }
  double learning_rate() const override { return model_.learning_rate; }
  void set_learning_rate(double lr) override {
    require(std::isfinite(lr) && lr >= 0, Status::InvalidArgument, "learning rate must be finite and >= 0");
    model_.learning_rate = lr;
  }
  std::vector<NamedTensor> named_weights() const override {
    const std::vector<float> all = model_.get_weights();
    std::vector<NamedTensor> out;
    for (const WeightInfo& w : model_.tensors_of(model_.net.keras_layer_order())) {
      const auto first = all.begin() + w.offset;
      out.push_back({w.name, std::vector<float>(first, first + num_elements(w.shape))});
    }
    return out;
  }
  bool has_validation() const override { return validation_; }
  bool has_accuracy() const override { return model_.options.accuracy; }

  // Kept current by the loop: what a checkpoint written now records, with the epoch's loss sums.
  core::TrainPosition position;
  EpochLoss loss;
  const core::DataOrder order;

 private:
  Model::Impl& model_;
  const Callbacks* callbacks_;
  bool weights_changed_ = false;
  bool validation_;
  int64_t steps_;
};

}  // namespace

Status Model::Impl::fit(Dataset& train, const FitOptions& o, const Callbacks* cb, History* history) {
  require_compiled("fit");
  require(o.validation_split >= 0 && o.validation_split < 1, Status::InvalidArgument,
          "validation_split must be in [0, 1), got " + std::to_string(o.validation_split));
  if (o.validation_split > 0 && !o.validation) {
    // Keras 3's train_validation_split (keras/src/trainers/data_adapters/array_slicing.py): split_at =
    // int(floor(n * (1.0 - validation_split))) in float64; the first split_at samples train, the rest
    // validate, before shuffling; a split that leaves either part empty is an error. (Validation data
    // given as well wins, as in Keras.)
    const int64_t n = train.num_samples();
    const auto split_at = static_cast<int64_t>(std::floor(static_cast<double>(n) * (1.0 - o.validation_split)));
    require(split_at > 0 && split_at < n, Status::InvalidArgument,
            "the training data has " + std::to_string(n) + " samples, too few to hold out validation_split = " +
                std::to_string(o.validation_split) + " of them and train on the rest");
    Dataset training_part = train.take(split_at);
    Dataset held_out = train.skip(split_at);
    FitOptions inner = o;
    inner.validation_split = 0;
    inner.validation = &held_out;
    return fit(training_part, inner, cb, history);
  }
  require(o.epochs > 0, Status::InvalidArgument, "epochs must be positive, got " + std::to_string(o.epochs));
  require(o.initial_epoch >= 0, Status::InvalidArgument, "initial_epoch must be >= 0");
  require(o.steps_per_epoch >= 0, Status::InvalidArgument, "steps_per_epoch must be >= 0");
  require(o.validation_steps >= 0, Status::InvalidArgument, "validation_steps must be >= 0");
  require(o.verbose >= 0 && o.verbose <= 2, Status::InvalidArgument, "verbose must be 0, 1 or 2");
  check_dataset(train, "training");
  if (o.validation) check_dataset(*o.validation, "validation");
  // Keras weighs training samples by class_weight or by the data's sample weights (never both);
  // validation by the validation data's own weights. Keras refuses class_weight for targets with more
  // than one position per sample (3 or more dimensions); so does kx.
  require(o.class_weight.empty() || loss_positions == 1, Status::InvalidArgument,
          "class_weight needs one class per sample; this model's output has " + std::to_string(loss_positions) +
              " positions per sample (Keras refuses class_weight for targets of 3 or more dimensions): weigh "
              "its samples with sample weights instead");
  const core::SampleWeights train_weights =
      o.class_weight.empty() ? train.sample_weights() : core::class_sample_weights(train, o.class_weight);
  const int64_t pass_steps = train.batches_per_pass();
  require(pass_steps > 0, Status::InvalidArgument,
          "the training dataset has fewer samples (" + std::to_string(train.num_samples()) + ") than one batch (" +
              std::to_string(train.batch_size()) + ") and drops the remainder");
  const int64_t steps = o.steps_per_epoch > 0 ? o.steps_per_epoch : pass_steps;
  if (strategy.parameter_servers()) {
    reserve_plans(std::min(train.batch_size(), train.num_samples()));
    require(strategy.parameter_servers()->role() != distribute::PsCluster::Role::Ps, Status::InvalidArgument,
            "a ps task serves the parameters (kx_strategy_serve); the chief and the workers call fit");
    if (strategy.parameter_servers()->role() == distribute::PsCluster::Role::Worker)
      return fit_as_ps_worker(train, train_weights, steps, pass_steps, history);
    return fit_as_ps_chief(train, train_weights, o, cb, history, steps, pass_steps);
  }
  require_same_training_on_every_worker(train, train_weights, steps);
  reserve_plans(std::min(train.batch_size(), train.num_samples()));

  // With several workers the chief alone shows the bar and runs the callbacks (as Keras); what they
  // decide (stop, a failure, the learning rate, new weights) reaches the others at each event.
  const bool chief = strategy.worker_index() == 0;
  if (!chief) cb = nullptr;
  const bool share = multi_worker() && chief_decides(cb && !cb->empty());
  const bool accuracy = options.accuracy;
  core::ProgressBar bar(chief ? o.verbose : 0, stdout);
  FitControl control(*this, cb, train, o.validation != nullptr, steps);
  // The callbacks of one event (on the chief), then their outcome on every worker.
  const auto at_event = [&](const std::function<bool()>& callbacks) {
    if (!share) return callbacks();
    bool stop = false;
    std::exception_ptr failure;
    try {
      stop = callbacks();
    } catch (...) {
      failure = std::current_exception();
    }
    return share_chief_decision(stop, control.take_weights_changed(), failure);
  };
  learning_rate = optimizer.learning_rate.value_or(0);
  // BackupAndRestore's backup of an interrupted fit comes before any other starting point.
  FitOptions from = o;
  if (cb)
    if (std::string backup = cb->backup_to_resume(); !backup.empty()) from.resume_from = backup;
  const core::FitStart start = core::start_of_fit(*this, from, steps, pass_steps, control.order, bar);
  align_workers_at_start(start);
  core::BatchStream batches(train, start.data_pass, start.data_position);
  const std::unique_ptr<core::BatchDecoder> decoder = training_decoder(train, start.data_pass, start.data_position);
  take_loss_sums();  // nothing left over from a call that failed
  const bool read_every_step = cb && cb->reads_batch_metrics();

  bool stop = at_event([&] { return control.emit(control.event(EventKind::TrainBegin)); });
  for (int epoch = start.epoch; epoch < o.epochs && !stop; ++epoch) {
    const bool resumed = epoch == start.epoch;
    const int64_t first_step = resumed ? start.step : 0;
    // A checkpoint holds the chief's own sums of the steps before it: the other workers start from none.
    const bool own_sums = resumed && chief;
    control.loss.begin(own_sums ? start.sums : backend::LossSums{}, own_sums ? start.seen : 0);
    stop = at_event([&] { return control.emit(control.event(EventKind::EpochBegin, epoch, first_step)); });
    bar.begin_epoch(epoch, o.epochs, steps, first_step);
    stage_dataset(train, train_weights);  // again after the validation of the epoch before
    core::Metrics m;
    for (int64_t step = first_step; step < steps && !stop; ++step) {
      const core::BatchStream::Batch batch = batches.next();
      if (decoder) use_rows(decoder->next());
      steps_.run(*this, batch.idx, batch.rows);
      bar.step_done(step + 1);
      if (const std::string notice = steps_.take_fallback_notice(); !notice.empty()) bar.message(notice);
      // The loss sums are this process's replicas': they saw its share of the batch.
      const int64_t rows_here = local_rows(batch.rows);
      control.loss.add_step(rows_here);
      control.position = {epoch, step + 1, steps, batches.pass(), batches.position()};
      double batch_loss = std::nan(""), batch_accuracy = std::nan("");
      std::exception_ptr diverged;  // TerminateOnNaN's failure, raised before the bar redraws
      if (read_every_step || bar.due(step + 1) || step + 1 == steps) {
        const bool only_this_step = control.loss.unread() == rows_here;
        const backend::LossSums read = control.loss.read();
        if (only_this_step) {
          batch_loss = read.loss / static_cast<double>(rows_here);
          if (accuracy) batch_accuracy = read.accuracy();
        }
        if (cb && cb->terminate_on_nan() && !std::isfinite(read.loss)) {
          diverged = std::make_exception_ptr(
              Error(Status::Diverged, "the loss became " + std::to_string(read.loss) + " at epoch " +
                                          std::to_string(epoch + 1) + ", batch " + std::to_string(step + 1) +
                                          " (TerminateOnNaN); the last checkpoint written before it is intact"));
          if (!share) std::rethrow_exception(diverged);
        }
        control.loss.write_metrics(m);
        bar.update(step + 1, m);
      }
      stop = at_event([&] {
        if (diverged) std::rethrow_exception(diverged);
        if (!cb || cb->empty()) return stop;
        Event e = control.event(EventKind::BatchEnd, epoch, step + 1);
        e.loss = control.loss.loss();
        e.accuracy = control.loss.accuracy();
        e.batch_loss = batch_loss;
        e.batch_accuracy = batch_accuracy;
        return control.emit(e);
      });
    }
    control.loss.read();  // a callback stopped the epoch early
    control.loss.combine_workers();  // the epoch's figures are every worker's samples
    Event end = control.event(EventKind::EpochEnd, epoch, steps);
    end.loss = control.loss.mean_loss();
    end.accuracy = control.loss.mean_accuracy();
    if (history) {
      history->record("loss", end.loss);
      if (accuracy) history->record("accuracy", end.accuracy);
    }
    if (o.validation && !stop) {
      Dataset val = o.validation_steps > 0 ? o.validation->take(o.validation_steps * o.validation->batch_size())
                                           : *o.validation;
      const EvalResult r = evaluate_checked(val);  // checked once, before the first epoch
      end.val_loss = r.loss;
      end.val_accuracy = r.accuracy;
      if (accuracy) m.emplace_back("val_accuracy", r.accuracy);
      m.emplace_back("val_loss", r.loss);
      if (history) {
        history->record("val_loss", r.loss);
        if (accuracy) history->record("val_accuracy", r.accuracy);
      }
    }
    if (cb && cb->logs_learning_rate()) {
      // Keras's learning-rate callbacks log the rate of the epoch (its float32 variable) at its end.
      const double lr = static_cast<float>(learning_rate);
      m.emplace_back("learning_rate", lr);
      if (history) history->record("learning_rate", lr);
    }
    if (history) history->finish_epoch(epoch);
    bar.end_epoch(m);
    control.position = {epoch, steps, steps, batches.pass(), batches.position()};
    stop = at_event([&] { return control.emit(end) || stop; });
  }
  steps_.finalize_ema(*this);  // before TrainEnd, as Keras: EarlyStopping's restored weights win
  at_event([&] {  // EarlyStopping's restored weights reach every worker
    control.emit(control.event(EventKind::TrainEnd));
    return false;
  });
  return stop ? Status::Stopped : Status::Ok;
}

}  // namespace kx
