#include "kx/callback.hpp"

#include "core/callbacks/builtin_callbacks.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {

class FunctionCallback final : public Callback {
 public:
  FunctionCallback(CallbackFn fn, bool reads_batch_metrics) : fn_(std::move(fn)), reads_(reads_batch_metrics) {}
  bool on_event(const Event& e, TrainingControl&) override { return fn_(e); }
  bool reads_batch_metrics() const override { return reads_; }

 private:
  CallbackFn fn_;
  bool reads_;
};

}  // namespace

void Callbacks::add(CallbackFn fn, bool reads_batch_metrics) {
  require(static_cast<bool>(fn), Status::InvalidArgument, "callback function is empty");
  callbacks_.push_back(std::make_shared<FunctionCallback>(std::move(fn), reads_batch_metrics));
}

void Callbacks::add(std::shared_ptr<Callback> cb) {
  require(cb != nullptr, Status::InvalidArgument, "callback is null");
  callbacks_.push_back(std::move(cb));
}

void Callbacks::add_model_checkpoint(const std::string& path_template, int64_t every_n_batches, int32_t keep_last) {
  add(core::make_model_checkpoint(path_template, every_n_batches, keep_last));
}

void Callbacks::add_early_stopping(const std::string& monitor, int32_t patience, double min_delta,
                                   bool restore_best_weights) {
  add(core::make_early_stopping(monitor, patience, min_delta, restore_best_weights));
}

void Callbacks::add_csv_logger(const std::string& path, bool append) { add(core::make_csv_logger(path, append)); }

void Callbacks::add_tensorboard(const std::string& log_dir, int64_t update_freq, int32_t histogram_freq) {
  add(core::make_tensorboard(log_dir, update_freq, histogram_freq));
}

void Callbacks::add_step_decay(const StepDecay& s) { add(core::make_step_decay(s)); }

void Callbacks::add_cosine_decay(const CosineDecay& c) { add(core::make_cosine_decay(c)); }

void Callbacks::add_reduce_lr_on_plateau(const ReduceLrOnPlateau& r) { add(core::make_reduce_lr_on_plateau(r)); }

void Callbacks::add_learning_rate_scheduler(LearningRateFn fn) {
  add(core::make_learning_rate_scheduler(std::move(fn)));
}

void Callbacks::add_backup_and_restore(const std::string& backup_dir, int64_t every_n_batches) {
  add(core::make_backup_and_restore(backup_dir, every_n_batches));
}

bool Callbacks::logs_learning_rate() const {
  for (const auto& cb : callbacks_)
    if (cb->logs_learning_rate()) return true;
  return false;
}

std::string Callbacks::backup_to_resume() const {
  for (const auto& cb : callbacks_)
    if (std::string from = cb->backup_to_resume(); !from.empty()) return from;
  return {};
}

bool Callbacks::dispatch(const Event& e, TrainingControl& control) const {
  bool stop = false;
  for (const auto& cb : callbacks_) stop = cb->on_event(e, control) || stop;  // every callback sees every event
  return stop;
}

bool Callbacks::reads_batch_metrics() const {
  if (terminate_on_nan_) return true;
  for (const auto& cb : callbacks_)
    if (cb->reads_batch_metrics()) return true;
  return false;
}

double History::get(const std::string& name, int32_t index) const {
  auto it = values_.find(name);
  require(it != values_.end(), Status::InvalidArgument, "history has no \"" + name + "\"");
  require(index >= 0 && index < static_cast<int32_t>(it->second.size()), Status::InvalidArgument,
          "history epoch index " + std::to_string(index) + " out of range [0, " + std::to_string(it->second.size()) +
              ")");
  return it->second[static_cast<size_t>(index)];
}

}  // namespace kx
