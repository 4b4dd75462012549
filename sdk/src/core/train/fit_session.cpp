#include "core/train/fit_session.hpp"

#include <cmath>
#include <cstdio>

#include "core/model/model_impl.hpp"
#include "io/durable_write.hpp"
#include "kx/error.hpp"

namespace kx::core {

FitSession::FitSession(Model::Impl& model, const Callbacks* callbacks, History* history, const Dataset& train,
                       const FitOptions& options, int64_t steps, int verbose)
    : metrics(model.options.accuracy),
      order(DataOrder::of(train)),
      model_(model),
      callbacks_(callbacks),
      history_(history),
      options_(options),
      steps_(steps),
      bar_(verbose, stdout) {}

Event FitSession::event(EventKind kind, int32_t epoch, int64_t step) const {
  Event e;
  e.kind = kind;
  e.epoch = epoch;
  e.step = step;
  e.steps_per_epoch = steps_;
  e.global_step = model_.optimizer_steps;
  e.learning_rate = model_.learning_rate;
  return e;
}

bool FitSession::emit(const Event& e) { return callbacks_ && callbacks_->dispatch(e, *this); }

void FitSession::begin_epoch(const backend::LossSums& sums, int64_t seen) {
  metrics.begin(sums, seen);
  shown_.clear();
}

void FitSession::show_epoch_begin(int32_t epoch, int64_t first_step) {
  bar_.begin_epoch(epoch, options_.epochs, steps_, first_step);
}

void FitSession::show_progress(int64_t step) {
  metrics.write_metrics(shown_);
  bar_.update(step, shown_);
}

std::exception_ptr FitSession::divergence(double loss_sum, int32_t epoch, int64_t step) const {
  if (!callbacks_ || !callbacks_->terminate_on_nan() || std::isfinite(loss_sum)) return nullptr;
  return std::make_exception_ptr(Error(Status::Diverged, "the loss became " + std::to_string(loss_sum) +
                                                             " at epoch " + std::to_string(epoch + 1) + ", batch " +
                                                             std::to_string(step) +
                                                             " (TerminateOnNaN); the last checkpoint written "
                                                             "before it is intact"));
}

Event FitSession::batch_end(int32_t epoch, int64_t step, const std::optional<BatchSums>& batch) const {
  Event e = event(EventKind::BatchEnd, epoch, step);
  e.loss = metrics.loss();
  e.accuracy = metrics.accuracy();
  if (batch) {
    e.batch_loss = batch->sums.loss / static_cast<double>(batch->rows);
    if (has_accuracy()) e.batch_accuracy = batch->sums.accuracy();
  }
  return e;
}

Event FitSession::end_epoch(int32_t epoch, bool stopped, const Metrics& history_extras) {
  const bool accuracy = has_accuracy();
  Event end = event(EventKind::EpochEnd, epoch, steps_);
  end.loss = metrics.mean_loss();
  end.accuracy = metrics.mean_accuracy();
  if (history_) {
    history_->record("loss", end.loss);
    if (accuracy) history_->record("accuracy", end.accuracy);
    for (const auto& [name, value] : history_extras) history_->record(name, value);
  }
  if (options_.validation && !stopped) {
    const Dataset& all = *options_.validation;
    const Dataset val = options_.validation_steps > 0 ? all.take(options_.validation_steps * all.batch_size()) : all;
    const EvalResult r = model_.evaluate_checked(val);  // checked once, before the first epoch
    end.val_loss = r.loss;
    end.val_accuracy = r.accuracy;
    if (accuracy) shown_.emplace_back("val_accuracy", r.accuracy);
    shown_.emplace_back("val_loss", r.loss);
    if (history_) {
      history_->record("val_loss", r.loss);
      if (accuracy) history_->record("val_accuracy", r.accuracy);
    }
  }
  if (callbacks_ && callbacks_->logs_learning_rate()) {
    // Keras's learning-rate callbacks log the rate of the epoch (its float32 variable) at its end.
    const double lr = static_cast<float>(model_.learning_rate);
    shown_.emplace_back("learning_rate", lr);
    if (history_) history_->record("learning_rate", lr);
  }
  if (history_) history_->finish_epoch(epoch);
  bar_.end_epoch(shown_);
  return end;
}

void FitSession::save_checkpoint(const std::string& path) {
  const TrainPosition p = checkpoint_position();
  fetch_state();
  std::string bytes;
  try {
    bytes = model_.encode(&p, &order, /*finite_only=*/true);
  } catch (const Error& e) {
    if (e.status() != Status::Diverged) throw;
    fail(Status::Diverged, "the training state became non-finite by epoch " + std::to_string(p.epoch + 1) + ", batch " +
                               std::to_string(p.step_in_epoch) + ": " + e.what() + "; checkpoint " + path +
                               " was not written, the checkpoints written before it are intact");
  }
  io::write_file_durably(path, bytes);
  Event e = event(EventKind::CheckpointSaved, p.epoch, p.step_in_epoch);
  e.path = path;
  emit(e);
}

TrainPosition FitSession::checkpoint_position() {
  TrainPosition p = position;
  metrics.write_sums(p);
  return p;
}

std::vector<float> FitSession::get_weights() const {
  fetch_state();
  return model_.get_weights();
}

void FitSession::set_weights(const std::vector<float>& w) {
  fetch_state();  // the rest of the state (optimizer slots, step) goes with the new weights
  model_.set_weights(w);
  weights_replaced();
}

double FitSession::initial_learning_rate() const { return model_.optimizer.learning_rate.value_or(0); }

double FitSession::learning_rate() const { return model_.learning_rate; }

void FitSession::set_learning_rate(double lr) {
  require(std::isfinite(lr) && lr >= 0, Status::InvalidArgument, "learning rate must be finite and >= 0");
  model_.learning_rate = lr;
}

std::vector<TrainingControl::NamedTensor> FitSession::named_weights() const {
  const std::vector<float> all = get_weights();
  std::vector<NamedTensor> out;
  for (const WeightInfo& w : model_.tensors_of(model_.net.keras_layer_order())) {
    const auto first = all.begin() + w.offset;
    out.push_back({w.name, std::vector<float>(first, first + num_elements(w.shape))});
  }
  return out;
}

bool FitSession::has_validation() const { return options_.validation != nullptr; }

bool FitSession::has_accuracy() const { return model_.options.accuracy; }

}  // namespace kx::core
