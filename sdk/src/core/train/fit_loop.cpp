// fit: the Keras loop of epochs and steps around the step runner (one training step on every replica),
// the replicas' data feeds and resume; its events, history, validation and progress bar are the fit
// session's (fit_session.hpp), which the parameter-server chief drives too.
#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "core/model/model_impl.hpp"
#include "core/train/batch_stream.hpp"
#include "core/train/class_weights.hpp"
#include "core/train/fit_session.hpp"
#include "core/train/parameter_server/ps_cluster.hpp"
#include "core/train/resume.hpp"
#include "core/train/train_position.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {

// The session of a synchronous fit: its steps run on this process's replicas, whose loss sums stay on
// the device until something reads them, a GPU running steps ahead of the host meanwhile: a callback
// reading batch metrics, TerminateOnNaN, a redraw of the bar, a checkpoint, the end of the epoch. A
// callback's new weights are in the model at once (and reach the other workers at the event's end).
class SyncFitSession final : public core::FitSession {
 public:
  using FitSession::FitSession;

  void add_step(int64_t rows) { unread_ += rows; }
  // Samples of the steps whose loss sums are not read yet.
  int64_t unread() const { return unread_; }
  // Reads the sums of the steps not read yet into the epoch's figures and returns them (zero when
  // every step was read).
  backend::LossSums read_steps() {
    if (unread_ == 0) return {};
    const backend::LossSums read = model_.take_loss_sums(unread_);
    metrics.add(read, unread_);
    unread_ = 0;
    return read;
  }
  // The epoch's sums over every worker's samples (collective; nothing changes with one worker).
  void combine_workers() {
    if (!model_.multi_worker()) return;
    int64_t seen = metrics.seen();
    const backend::LossSums sums = model_.sum_across_workers(metrics.sums(), &seen);
    metrics.set_totals(sums, seen);
  }
  // Whether a callback replaced weights since the last call.
  bool take_weights_changed() { return std::exchange(weights_changed_, false); }

 protected:
  void weights_replaced() override { weights_changed_ = true; }
  core::TrainPosition checkpoint_position() override {
    read_steps();  // the checkpoint's loss sums include every step taken
    return FitSession::checkpoint_position();
  }

 private:
  int64_t unread_ = 0;
  bool weights_changed_ = false;
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
  SyncFitSession session(*this, cb, history, train, o, steps, chief ? o.verbose : 0);
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
    return share_chief_decision(stop, session.take_weights_changed(), failure);
  };
  learning_rate = optimizer.learning_rate.value_or(0);
  // BackupAndRestore's backup of an interrupted fit comes before any other starting point.
  FitOptions from = o;
  if (cb)
    if (std::string backup = cb->backup_to_resume(); !backup.empty()) from.resume_from = backup;
  const core::FitStart start = core::start_of_fit(*this, from, steps, pass_steps, session.order, session.bar());
  align_workers_at_start(start);
  core::BatchStream batches(train, start.data_pass, start.data_position);
  const std::unique_ptr<core::BatchDecoder> decoder = training_decoder(train, start.data_pass, start.data_position);
  take_loss_sums();  // nothing left over from a call that failed
  // A masked output's loss is normalised batch by batch (take_loss_sums).
  const bool read_every_step = (cb && cb->reads_batch_metrics()) || net.output_masked();

  bool stop = at_event([&] { return session.emit(session.event(EventKind::TrainBegin)); });
  for (int epoch = start.epoch; epoch < o.epochs && !stop; ++epoch) {
    const bool resumed = epoch == start.epoch;
    const int64_t first_step = resumed ? start.step : 0;
    // A checkpoint holds the chief's own sums of the steps before it: the other workers start from none.
    const bool own_sums = resumed && chief;
    session.begin_epoch(own_sums ? start.sums : backend::LossSums{}, own_sums ? start.seen : 0);
    stop = at_event([&] { return session.emit(session.event(EventKind::EpochBegin, epoch, first_step)); });
    session.show_epoch_begin(epoch, first_step);
    stage_dataset(train, train_weights);  // again after the validation of the epoch before
    feeds_moved_by_nested_call = false;   // that validation's mark: the feeds were just staged
    for (int64_t step = first_step; step < steps && !stop; ++step) {
      const core::BatchStream::Batch batch = batches.next();
      if (std::exchange(feeds_moved_by_nested_call, false)) stage_dataset(train, train_weights);
      if (decoder) use_rows(decoder->next());
      steps_.run(*this, batch.idx, batch.rows);
      session.bar().step_done(step + 1);
      if (const std::string notice = steps_.take_fallback_notice(); !notice.empty()) session.bar().message(notice);
      // The loss sums are this process's replicas': they saw its share of the batch.
      const int64_t rows_here = local_rows(batch.rows);
      session.add_step(rows_here);
      session.position = {epoch, step + 1, steps, batches.pass(), batches.position()};
      std::optional<core::BatchSums> this_batch;
      std::exception_ptr diverged;  // TerminateOnNaN's failure, raised before the bar redraws
      if (read_every_step || session.bar().due(step + 1) || step + 1 == steps) {
        const bool only_this_step = session.unread() == rows_here;
        const backend::LossSums read = session.read_steps();
        if (only_this_step) this_batch = core::BatchSums{read, rows_here};
        diverged = session.divergence(read.loss, epoch, step + 1);
        if (diverged && !share) std::rethrow_exception(diverged);
        session.show_progress(step + 1);
      }
      stop = at_event([&] {
        if (diverged) std::rethrow_exception(diverged);
        if (!session.has_callbacks()) return stop;
        return session.emit(session.batch_end(epoch, step + 1, this_batch));
      });
    }
    session.read_steps();  // a callback stopped the epoch early
    session.combine_workers();  // the epoch's figures are every worker's samples
    const Event end = session.end_epoch(epoch, stop);
    session.position = {epoch, steps, steps, batches.pass(), batches.position()};
    stop = at_event([&] { return session.emit(end) || stop; });
  }
  steps_.finalize_ema(*this);  // before TrainEnd, as Keras: EarlyStopping's restored weights win
  at_event([&] {  // EarlyStopping's restored weights reach every worker
    session.emit(session.event(EventKind::TrainEnd));
    return false;
  });
  return stop ? Status::Stopped : Status::Ok;
}

}  // namespace kx
