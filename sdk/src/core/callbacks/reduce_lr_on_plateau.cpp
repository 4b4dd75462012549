// ReduceLROnPlateau, as Keras 3's (keras/src/callbacks/reduce_lr_on_plateau.py): when the monitored
// value has not improved for `patience` epochs, rate = max(rate * factor, min_lr), then `cooldown`
// epochs before waiting again. The rate is read as the float32 variable Keras keeps.
#include <cmath>

#include "core/callbacks/builtin_callbacks.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

double epoch_value(const std::string& monitor, const Event& e) {
  return monitor == "loss" ? e.loss : monitor == "accuracy" ? e.accuracy : monitor == "val_loss" ? e.val_loss : e.val_accuracy;
}

class ReduceLrOnPlateauCallback final : public Callback {
 public:
  explicit ReduceLrOnPlateauCallback(ReduceLrOnPlateau r)
      : r_(std::move(r)),
        higher_is_better_(r_.mode == ReduceLrOnPlateau::Mode::Max ||
                          (r_.mode == ReduceLrOnPlateau::Mode::Auto && r_.monitor.find("acc") != std::string::npos)) {}

  bool reads_batch_metrics() const override { return false; }  // epochs only
  bool logs_learning_rate() const override { return true; }

  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind == EventKind::TrainBegin) {
      require(r_.monitor.rfind("val_", 0) != 0 || control.has_validation(), Status::InvalidArgument,
              "ReduceLROnPlateau monitors \"" + r_.monitor + "\" but fit has no validation data");
      require(r_.monitor.find("accuracy") == std::string::npos || control.has_accuracy(), Status::InvalidArgument,
              "ReduceLROnPlateau monitors \"" + r_.monitor + "\" but the model was compiled without the accuracy metric");
      best_ = higher_is_better_ ? -INFINITY : INFINITY;  // each fit starts afresh, as Keras's on_train_begin
      wait_ = cooldown_counter_ = 0;
      return false;
    }
    if (e.kind != EventKind::EpochEnd) return false;
    const double current = epoch_value(r_.monitor, e);
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      wait_ = 0;
    }
    // NaN never improves (numpy's less and greater are false).
    const bool improved = higher_is_better_ ? current > best_ + r_.min_delta : current < best_ - r_.min_delta;
    if (improved) {
      best_ = current;
      wait_ = 0;
    } else if (cooldown_counter_ == 0 && ++wait_ >= r_.patience) {
      const double old_lr = static_cast<float>(control.learning_rate());
      if (old_lr > static_cast<float>(r_.min_lr)) {
        control.set_learning_rate(std::max(old_lr * r_.factor, r_.min_lr));
        cooldown_counter_ = r_.cooldown;
        wait_ = 0;
      }
    }
    return false;
  }

 private:
  ReduceLrOnPlateau r_;
  bool higher_is_better_;
  double best_ = INFINITY;
  int32_t wait_ = 0;
  int32_t cooldown_counter_ = 0;
};

class LearningRateScheduler final : public Callback {
 public:
  explicit LearningRateScheduler(LearningRateFn fn) : fn_(std::move(fn)) {}
  bool reads_batch_metrics() const override { return false; }  // epochs only
  bool logs_learning_rate() const override { return true; }
  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind != EventKind::EpochBegin) return false;
    const double lr = fn_(e.epoch, static_cast<float>(control.learning_rate()));
    require(std::isfinite(lr) && lr >= 0, Status::InvalidArgument,
            "LearningRateScheduler: the schedule returned " + std::to_string(lr) + " for epoch " +
                std::to_string(e.epoch) + "; a learning rate is finite and >= 0");
    control.set_learning_rate(lr);
    return false;
  }

 private:
  LearningRateFn fn_;
};

}  // namespace

std::shared_ptr<Callback> make_reduce_lr_on_plateau(const ReduceLrOnPlateau& r) {
  require(r.monitor == "loss" || r.monitor == "accuracy" || r.monitor == "val_loss" || r.monitor == "val_accuracy",
          Status::InvalidArgument,
          "ReduceLROnPlateau: unknown monitor \"" + r.monitor + "\" (loss, accuracy, val_loss or val_accuracy)");
  require(std::isfinite(r.factor) && r.factor >= 0 && r.factor < 1, Status::InvalidArgument,
          "ReduceLROnPlateau: factor must be in [0, 1), got " + std::to_string(r.factor));
  require(r.patience >= 0 && r.cooldown >= 0, Status::InvalidArgument, "ReduceLROnPlateau: patience and cooldown must be >= 0");
  require(std::isfinite(r.min_delta), Status::InvalidArgument, "ReduceLROnPlateau: min_delta must be finite");
  require(std::isfinite(r.min_lr) && r.min_lr >= 0, Status::InvalidArgument, "ReduceLROnPlateau: min_lr must be finite and >= 0");
  const int mode = static_cast<int>(r.mode);
  require(mode >= 0 && mode <= 2, Status::InvalidArgument, "ReduceLROnPlateau: unknown mode " + std::to_string(mode));
  return std::make_shared<ReduceLrOnPlateauCallback>(r);
}

std::shared_ptr<Callback> make_learning_rate_scheduler(LearningRateFn fn) {
  require(static_cast<bool>(fn), Status::InvalidArgument, "LearningRateScheduler: the schedule function is empty");
  return std::make_shared<LearningRateScheduler>(std::move(fn));
}

}  // namespace kx::core
